"""The agent's core: messages, the model boundary, tools and the loop. No UI or SDK imports."""
