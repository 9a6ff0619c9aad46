"""Secret redaction: known values, token shapes, and text redacted as a stream of pieces."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_tutorial.core.messages import tool_call, user_message
from agent_tutorial.core.model import ModelRequest
from agent_tutorial.core.tools import ToolResult
from agent_tutorial.features.masked_replies import MaskedReplies
from agent_tutorial.features.redaction import (
    ANSWER_HOLD_CHARS,
    MAX_HELD_CHARS,
    STREAM_BATCH_CHARS,
    AnswerMask,
    Redacted,
    Redactor,
    held_tail_start,
    known_secrets,
    looks_secret,
)
from agent_tutorial.testing import ScriptedModel, text_reply, tool_reply

GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2
OPENAI_KEY = "sk-proj-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2"
AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
SLACK_TOKEN = "xoxb-1234567890-abcdefghij"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0"
    ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)
PEM_BLOCK = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    + "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2MXgD8bFbWq0dP7Hk3ZMAf7XwVbK\n" * 25
    + "-----END RSA PRIVATE KEY-----"
)


def shapes_only() -> Redactor:
    return Redactor({})


def test_names_that_look_secret() -> None:
    for name in ("OPENAI_API_KEY", "github_token", "DB_PASSWORD", "AWS_CREDENTIALS", "MySecret"):
        assert looks_secret(name), name
    for name in ("HOME", "PATH", "OPENAI_BASE_URL", "AGENT_TUTORIAL_MODEL"):
        assert not looks_secret(name), name


def test_known_values_are_shown_by_their_variable_name() -> None:
    redactor = Redactor({"hunter2-hunter2": "DB_PASSWORD"})

    redacted = redactor.redact("connect --password hunter2-hunter2 --retry")

    assert redacted.text == "connect --password [REDACTED:DB_PASSWORD] --retry"
    assert redacted.count == 1


def test_a_value_containing_another_is_masked_whole() -> None:
    redactor = Redactor({"abcdefgh": "SHORT_KEY", "abcdefgh-and-more": "LONG_KEY"})

    assert redactor.redact("x abcdefgh-and-more y").text == "x [REDACTED:LONG_KEY] y"


def test_plain_text_comes_back_as_it_was() -> None:
    assert shapes_only().redact("nothing to see") == Redacted("nothing to see", 0)


def test_a_known_value_starting_inside_a_rejected_token_is_still_masked() -> None:
    # "sk-…" right after a letter is no API key; the scan goes on from the next character,
    # where a known value begins.
    redactor = Redactor({"k-" + "A" * 20: "ODD_KEY"})

    assert redactor.redact("ask-" + "A" * 20).text == "as[REDACTED:ODD_KEY]"


def test_a_rejected_token_does_not_end_the_scan() -> None:
    text = f"xghp_{'B' * 20} then {GITHUB_TOKEN}"

    assert shapes_only().redact(text).text == f"xghp_{'B' * 20} then [REDACTED:github_token]"


@pytest.mark.parametrize(
    ("secret", "kind"),
    [
        (OPENAI_KEY, "api_key"),
        ("sk-" + "a" * 40, "api_key"),
        (GITHUB_TOKEN, "github_token"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_token"),
        (AWS_KEY_ID, "aws_access_key_id"),
        (SLACK_TOKEN, "slack_token"),
        (JWT, "jwt"),
        (PEM_BLOCK, "private_key"),
    ],
)
def test_token_shapes_are_masked_by_kind(secret: str, kind: str) -> None:
    redacted = shapes_only().redact(f"before {secret} after")

    assert redacted.text == f"before [REDACTED:{kind}] after"
    assert redacted.count == 1


def test_a_private_key_block_cut_short_is_masked_to_its_end() -> None:
    cut = PEM_BLOCK[: len(PEM_BLOCK) // 2]

    assert shapes_only().redact(cut).text == "[REDACTED:private_key]"


@pytest.mark.parametrize(
    "text",
    ["task-" + "a" * 30, "the disk-usage-report-for-yesterday", "AKIA", "eyJ.eyJ.x", "sk-short"],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert shapes_only().redact(text).count == 0


def test_without_patterns_only_known_values_are_masked() -> None:
    redactor = Redactor({"hunter2-hunter2": "DB_PASSWORD"}, patterns=False)

    redacted = redactor.redact(f"{GITHUB_TOKEN} hunter2-hunter2")

    assert redacted.text == f"{GITHUB_TOKEN} [REDACTED:DB_PASSWORD]"


def test_known_secrets_come_from_secret_looking_names_of_8_or_more_characters() -> None:
    environment = {
        "OPENAI_API_KEY": "sk-live-value-1",
        "GH_TOKEN": "gho_value_2345",
        "SHORT_TOKEN": "seven77",
        "HOME": "/home/someone",
        "EMPTY_SECRET": "",
    }
    dotenv = {"DEEPSEEK_API_KEY": "deepseek-value", "UNRELATED": "not-a-secret"}

    secrets = known_secrets(
        [environment, dotenv], api_key="sk-in-use-0000", api_key_name="DEEPSEEK_API_KEY"
    )

    assert secrets == {
        "sk-in-use-0000": "DEEPSEEK_API_KEY",
        "sk-live-value-1": "OPENAI_API_KEY",
        "gho_value_2345": "GH_TOKEN",
        "deepseek-value": "DEEPSEEK_API_KEY",
    }


@pytest.mark.parametrize(("value", "masked"), [("k" * 7, False), ("k" * 8, True), ("k" * 9, True)])
def test_a_secret_value_is_known_from_8_characters(value: str, masked: bool) -> None:
    # Shorter values are placeholders such as "EMPTY"; masking them would mangle words.
    from_environment = known_secrets([{"DB_PASSWORD": value}], api_key=None, api_key_name="K")
    from_the_key_in_use = known_secrets([], api_key=value, api_key_name="OPENAI_API_KEY")

    assert (value in from_environment) is masked
    assert (value in from_the_key_in_use) is masked


def test_the_base_url_and_model_name_are_never_secrets() -> None:
    environment = {"PROXY_TOKEN_URL": "http://127.0.0.1:8080/v1", "MODEL_KEY": "qwen2.5-coder"}

    secrets = known_secrets(
        [environment],
        api_key=None,
        api_key_name="OPENAI_API_KEY",
        public=["http://127.0.0.1:8080/v1", "qwen2.5-coder"],
    )

    assert secrets == {}


def test_the_redaction_step_adds_to_the_results_count() -> None:
    result = ToolResult(content=f"key {AWS_KEY_ID}", redactions=2)

    redacted = shapes_only().redact_result(result)

    assert redacted == ToolResult(content="key [REDACTED:aws_access_key_id]", redactions=3)


def test_an_error_result_stays_an_error_when_redacted() -> None:
    result = ToolResult(content=f"Error [x]: {OPENAI_KEY}", is_error=True, error_code="x")

    redacted = shapes_only().redact_result(result)

    assert (redacted.is_error, redacted.error_code) == (True, "x")
    assert OPENAI_KEY not in redacted.content


# --- streams ---------------------------------------------------------------------------


def redact_in_pieces(redactor: Redactor, text: str, cuts: list[int]) -> tuple[str, int]:
    # The least overlap that still holds the longest secret here, and a scan at every
    # piece, so the hold line falls inside the text as often as possible.
    stream = redactor.stream(overlap_chars=len(PEM_BLOCK), batch_chars=0)
    points = sorted({min(cut, len(text)) for cut in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    out = "".join(stream.feed(piece) for piece in pieces) + stream.finish()
    return out, stream.count


KNOWN = {"hunter2-hunter2": "DB_PASSWORD", "hunter2-hunter2-and-more": "ADMIN_PASSWORD"}
LONG_KEY = "sk-" + "k" * 3000  # longer than the overlap: held back while it still grows
SECRETS = [OPENAI_KEY, GITHUB_TOKEN, AWS_KEY_ID, SLACK_TOKEN, JWT, PEM_BLOCK, LONG_KEY, *KNOWN]
FILLER = st.text(alphabet=st.sampled_from("ab \n.-_=/"), max_size=40)


@given(
    parts=st.lists(st.tuples(FILLER, st.sampled_from(SECRETS)), min_size=1, max_size=6),
    tail=FILLER,
    cuts=st.lists(st.integers(min_value=0, max_value=12_000), max_size=12),
)
def test_a_stream_cut_anywhere_redacts_like_the_whole_text(
    parts: list[tuple[str, str]], tail: str, cuts: list[int]
) -> None:
    redactor = Redactor(KNOWN)
    text = "".join(filler + " " + secret + " " for filler, secret in parts) + tail

    streamed, count = redact_in_pieces(redactor, text, cuts)

    whole = redactor.redact(text)
    assert (streamed, count) == (whole.text, whole.count)
    assert not any(secret[:8] in streamed for secret in SECRETS)


def test_a_known_value_that_begins_a_longer_one_waits_for_the_rest() -> None:
    stream = Redactor(KNOWN).stream(overlap_chars=100, batch_chars=0)

    out = stream.feed("x" * 5000 + " hunter2-hunter2-an") + stream.feed("d-more.") + stream.finish()

    assert out == "x" * 5000 + " [REDACTED:ADMIN_PASSWORD]."


@given(cut=st.integers(min_value=1, max_value=len(PEM_BLOCK) - 1))
def test_a_pem_block_split_in_two_pieces_is_masked_whole(cut: int) -> None:
    text = "key:\n" + PEM_BLOCK + "\ndone"

    streamed, count = redact_in_pieces(shapes_only(), text, [cut + 5])

    assert (streamed, count) == ("key:\n[REDACTED:private_key]\ndone", 1)


def test_a_stream_releases_text_long_before_it_ends() -> None:
    stream = shapes_only().stream()

    released = stream.feed("y\n" * 100_000)

    assert len(released) >= 200_000 - stream.overlap_chars
    assert released + stream.finish() == "y\n" * 100_000


def test_a_stream_does_not_mistake_the_end_of_a_word_for_a_token_start() -> None:
    redactor = shapes_only()
    stream = redactor.stream()
    held = "sk-" + "a" * 30 + "y" * (stream.overlap_chars - 33)
    first = "x" * STREAM_BATCH_CHARS + "ta" + held  # "ta" is released, "sk-…" held back

    released = stream.feed(first)
    out = released + stream.feed("z") + stream.finish()

    assert released == "x" * STREAM_BATCH_CHARS + "ta"
    assert out == first + "z"


def test_text_after_a_private_key_cut_short_survives() -> None:
    cut = PEM_BLOCK[: len(PEM_BLOCK) // 2]
    after = "\n\nerror: build failed at step 3, see the log. Exit code 1\n"

    assert shapes_only().redact(cut + after).text == "[REDACTED:private_key]" + after


def test_a_stream_holds_back_the_longest_known_value_whatever_its_name_sorts_as() -> None:
    # "aaaa…" sorts before "zzzz…" but is longer: the hold must be its length.
    stream = Redactor({"zzzzzzzz": "SHORT", "aaaabbbbcccc": "LONG"}).stream(
        overlap_chars=0, batch_chars=0
    )

    out = stream.feed("aaaabbbbcc") + stream.feed("cc") + stream.finish()

    assert out == "[REDACTED:LONG]"


def test_a_stream_asked_to_hold_nothing_back_releases_each_piece_whole() -> None:
    stream = shapes_only().stream(overlap_chars=0, batch_chars=0)

    assert stream.feed("abc") == "abc"


def test_a_stream_scans_once_the_overlap_and_a_batch_have_arrived() -> None:
    stream = shapes_only().stream(overlap_chars=4, batch_chars=4)

    assert stream.feed("1234567") == ""
    assert stream.feed("8") == "1234"  # the last 4 stay held back
    assert stream.finish() == "5678"


def test_a_secret_at_the_very_end_of_a_stream_is_masked_when_it_finishes() -> None:
    stream = shapes_only().stream()

    assert stream.feed("key " + GITHUB_TOKEN) + stream.finish() == "key [REDACTED:github_token]"


def test_a_secret_well_before_the_hold_line_is_released_masked() -> None:
    stream = shapes_only().stream(overlap_chars=10, batch_chars=0)

    released = stream.feed(GITHUB_TOKEN + " " + "x" * 50)

    assert released == "[REDACTED:github_token] " + "x" * 40


def test_a_private_key_starting_right_at_the_hold_line_waits_for_the_rest() -> None:
    # The first piece ends with the key's first line and its newline; the key matches
    # there only as a key cut short, which must not be released before the rest arrives.
    first = PEM_BLOCK[:97]  # the BEGIN line and one line of base64, newline included
    stream = shapes_only().stream(overlap_chars=len(first), batch_chars=0)

    out = stream.feed("x" * 10 + first) + stream.feed(PEM_BLOCK[97:] + "\ndone") + stream.finish()

    assert out == "x" * 10 + "[REDACTED:private_key]\ndone"


@pytest.mark.parametrize(
    ("token_chars", "out"),
    [
        (MAX_HELD_CHARS, "x [REDACTED:github_token]"),
        (MAX_HELD_CHARS + 1, "x [REDACTED:github_token]BBBB"),
    ],
)
def test_a_growing_token_is_held_back_up_to_the_limit_then_masked_as_it_stands(
    token_chars: int, out: str
) -> None:
    stream = shapes_only().stream(overlap_chars=1, batch_chars=0)
    token = "ghp_" + "A" * (token_chars - 4)

    assert stream.feed("x " + token) + stream.feed("BBBB") + stream.finish() == out


# --- what the model writes, masked as it streams (issue 27) ---------------------------------

PASSPHRASE = "correct horse battery staple"
ANSWER_SECRETS = {"sk-test-secret-0123456789": "OPENAI_API_KEY", PASSPHRASE: "VAULT_PASSWORD"}


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("", ""),
        ("done. ", ""),  # ends between words: nothing may still grow
        ("done.\n", ""),
        ("the key is sk-te", "sk-te"),  # the word still being written
        ("x", "x"),
        ("use Bearer ", "Bearer "),  # a token may follow
        ("use Bearer abc", "Bearer abc"),
        ("use bearer\tab", "bearer\tab"),
        ("bearer  and more ", ""),
        ("key:\n-----BEGIN RSA PRIV", "-----BEGIN RSA PRIV"),  # a PEM header on its line
        # The header is whole: the word is held here, and the block, a match that reaches
        # the end, by the mask while it grows.
        ("-----BEGIN RSA PRIVATE KEY-----\nMII", "MII"),
        ("-----BEGIN X\nsaid. ", ""),  # the header's line is over
        ("MII\n-----END RSA PRIV", "-----END RSA PRIV"),  # the block's end, on its line
        # Held from the line's first marker, not its last.
        ("MII\n-----END RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----"),
        ("rule:\n-----\nsaid. ", ""),  # a marker on a line already over is not looked at
        ("the word is correct hor", "correct hor"),  # a known value with spaces, begun
        ("the word is correct ", "correct "),
        ("the word is ccorrect hor", "correct hor"),  # begun right after its first letter
        ("it is correct horse battery staple", "staple"),  # whole: only the word is held
    ],
)
def test_only_an_end_that_may_still_grow_into_a_secret_is_held(text: str, held: str) -> None:
    start = held_tail_start(text, 0, tuple(ANSWER_SECRETS))

    assert text[start:] == held


@pytest.mark.parametrize(
    ("text", "start", "held"),
    [
        ("said sk-te", 8, 8),  # the word began before what is left
        ("-----BEGIN RSA", 3, 11),  # so did the header: only the last word is held
        ("correct hor", 4, 8),  # and the known value
        ("Bearer x", 3, 7),
    ],
)
def test_what_was_already_passed_on_is_never_held_again(text: str, start: int, held: int) -> None:
    assert held_tail_start(text, start, (PASSPHRASE,)) == held


ANSWER_WITH_SECRETS = (
    "Your key is sk-test-secret-0123456789, the vault says correct horse battery staple, "
    f"and the token {GITHUB_TOKEN} came with Bearer abcDEF123456789xyz.\n{PEM_BLOCK}\nDone."
)


def masked_as_streamed(text: str, cuts: list[int]) -> tuple[list[str], str]:
    mask = AnswerMask(Redactor(ANSWER_SECRETS))
    bounds = [0, *sorted(set(cuts)), len(text)]
    shown = [mask.feed(text[start:end]) for start, end in itertools.pairwise(bounds)]
    return shown, "".join(shown) + mask.finish()


@given(st.lists(st.integers(min_value=0, max_value=len(ANSWER_WITH_SECRETS)), max_size=40))
def test_a_streamed_answer_is_masked_as_the_whole_text_is_whatever_the_pieces(
    cuts: list[int],
) -> None:
    _, shown = masked_as_streamed(ANSWER_WITH_SECRETS, cuts)

    assert shown == Redactor(ANSWER_SECRETS).redact(ANSWER_WITH_SECRETS).text


def test_the_answer_cut_once_anywhere_is_masked_as_the_whole_text_is() -> None:
    whole = Redactor(ANSWER_SECRETS).redact(ANSWER_WITH_SECRETS).text
    for cut in range(len(ANSWER_WITH_SECRETS)):
        assert masked_as_streamed(ANSWER_WITH_SECRETS, [cut])[1] == whole, cut


def test_each_secret_split_at_every_point_is_masked_whole() -> None:
    for secret in ANSWER_SECRETS:
        text = f"it is {secret} here"
        for cut in range(len(text)):
            _, shown = masked_as_streamed(text, [cut])
            assert shown == f"it is [REDACTED:{ANSWER_SECRETS[secret]}] here", cut


def test_words_are_passed_on_as_they_end_not_when_the_answer_does() -> None:
    shown, _ = masked_as_streamed("Here is the plan: first read, then", [5, 13, 26])

    assert shown == ["Here ", "is the ", "plan: first ", "read, "]


def test_a_reply_s_text_is_masked_in_the_message_and_the_stream() -> None:
    streamed: list[str] = []
    model = ScriptedModel([text_reply(f"the key: {TEST_KEY}. ok")])
    replies = MaskedReplies(model, Redactor({TEST_KEY: "OPENAI_API_KEY"}))

    reply = replies.complete(ModelRequest((user_message("key?"),), on_text=streamed.append))

    assert reply.message.content == "the key: [REDACTED:OPENAI_API_KEY]. ok"
    assert "".join(streamed) == reply.message.content


def test_a_reply_without_a_secret_and_a_call_s_arguments_are_left_as_they_are() -> None:
    call = tool_call("c1", "bash", f'{{"command": "echo {TEST_KEY}"}}')
    model = ScriptedModel([text_reply("nothing secret"), tool_reply(call)])
    replies = MaskedReplies(model, Redactor({TEST_KEY: "OPENAI_API_KEY"}))
    request = ModelRequest((user_message("go"),))

    assert replies.complete(request).message.content == "nothing secret"
    assert replies.complete(request).message.tool_calls == (call,)


TEST_KEY = "sk-test-secret-0123456789"


def feed_in_pieces(mask: AnswerMask, text: str, size: int = 16) -> str:
    return "".join(mask.feed(text[start : start + size]) for start in range(0, len(text), size))


def test_a_word_longer_than_the_hold_is_shown_as_it_comes() -> None:
    word = "x" * 10_000
    mask = AnswerMask(Redactor({}))

    shown = feed_in_pieces(mask, word)

    assert len(word) - ANSWER_HOLD_CHARS <= len(shown) < len(word)
    assert shown + mask.finish() == word


@pytest.mark.parametrize(
    ("length", "shown"),
    [
        (ANSWER_HOLD_CHARS, ""),  # as long as the hold: still waits for its end
        (ANSWER_HOLD_CHARS + 1, "[REDACTED:api_key]"),  # longer: masked as it stands
    ],
)
def test_a_token_still_growing_waits_for_its_end_up_to_the_hold(length: int, shown: str) -> None:
    mask = AnswerMask(Redactor({}))

    assert feed_in_pieces(mask, "sk-" + "a" * (length - 3)) == shown
    assert mask.finish() == ("[REDACTED:api_key]" if not shown else "")


def test_a_pem_block_streamed_line_by_line_is_never_shown_before_its_end() -> None:
    # After each line of base64 only a newline separates the match from the hold line: the
    # next line of the key may be on its way, so the block waits whole.
    lines = f"key:\n{PEM_BLOCK}\ndone".splitlines(keepends=True)
    mask = AnswerMask(Redactor({}))

    shown = [mask.feed(line) for line in lines]

    assert shown == ["key:\n", *[""] * (len(lines) - 1)]
    assert mask.finish() == "[REDACTED:private_key]\ndone"


@pytest.mark.parametrize(
    ("piece", "shown"),
    [
        ("the key sk-abcdefgh1234 is set ", "the key [REDACTED:api_key] is set "),
        ("the key sk-abcdefgh1234 \n", "the key "),  # only whitespace after it: may go on
    ],
)
def test_a_secret_is_passed_on_masked_once_a_word_follows_it(piece: str, shown: str) -> None:
    mask = AnswerMask(Redactor({}))

    assert mask.feed(piece) == shown


def test_the_hold_limit_counts_a_token_s_own_length_not_where_it_starts() -> None:
    prose = "word " * 700  # the token starts 3,500 characters into the piece
    mask = AnswerMask(Redactor({}))

    assert mask.feed(prose + "sk-abcdefgh1234") == prose
    assert mask.feed("5678 done") + mask.finish() == "[REDACTED:api_key] done"
