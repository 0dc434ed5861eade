from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelsage.errors import ParseError
from kernelsage.parsing import (
    ANSWER_FORMAT,
    AdoptionRecord,
    format_parse_feedback,
    parse_adoption_only,
    parse_answer,
    render_answer,
)

KERNEL = "#include <cstddef>\nvoid add(const float* a, float* b, size_t n) {}\n"
ADOPTION = '```json\n{"adoption": [{"id": 3, "adopted": true, "rationale": "Vectorise the loop."}]}\n```\n'


def answer(*blocks: str) -> str:
    return "Here is my candidate.\n\n" + "\n".join(blocks)


def parse(text: str, files=("kernel.cpp",), shown=(3,)):
    return parse_answer(text, expected_files=list(files), shown_ids=set(shown))


# --- round trips ---------------------------------------------------------------------------------------

safe_names = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_+-]{0,12}\.(cpp|h|cu|py|txt|c)", fullmatch=True)
contents = (
    st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=200)
    .filter(lambda text: "```" not in text and text.strip())
    .map(lambda text: text if text.endswith("\n") else text + "\n")
)
rationales = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=80).filter(
    lambda text: text.strip() == text and text and text not in ("...", "…")  # the parser refuses placeholders
)
adoptions = st.dictionaries(
    st.integers(min_value=0, max_value=2**53),
    st.builds(AdoptionRecord, adopted=st.booleans(), rationale=rationales),
    max_size=6,
)


@given(files=st.dictionaries(safe_names, contents, min_size=1, max_size=4), adoption=adoptions)
def test_parse_inverts_render(files: dict[str, str], adoption: dict[int, AdoptionRecord]) -> None:
    parsed = parse_answer(
        render_answer(files, adoption), expected_files=list(files), shown_ids=adoption.keys()
    )

    assert parsed.files == files
    assert parsed.adoption == adoption
    assert parsed.missing_ids == [] and parsed.unknown_ids == [] and parsed.complete


@given(adoption=adoptions, shown=st.sets(st.integers(min_value=0, max_value=2**53), max_size=6))
def test_missing_and_unknown_ids_are_reported_not_raised(adoption: dict, shown: set[int]) -> None:
    text = render_answer({"kernel.cpp": KERNEL}, adoption)
    parsed = parse_answer(text, expected_files=["kernel.cpp"], shown_ids=shown)

    assert parsed.missing_ids == sorted(shown - adoption.keys())
    assert parsed.unknown_ids == sorted(adoption.keys() - shown)
    assert parsed.adoption == adoption


def test_file_contents_are_kept_byte_for_byte() -> None:
    tricky = "int x;\f\n  // form feed above, trailing spaces   \n\n\tlast line"
    parsed = parse(answer(f"```cpp file=kernel.cpp\n{tricky}\n```", ADOPTION))
    assert parsed.files["kernel.cpp"] == tricky + "\n"


def test_longer_and_tilde_fences_may_hold_triple_backticks() -> None:
    readme = "Use it like this:\n```\nadd(a, b, n);\n```\n"
    text = answer(
        f"````markdown file=README.md\n{readme}````", f"~~~cpp file=kernel.cpp\n{KERNEL}~~~", ADOPTION
    )
    parsed = parse(text, files=("kernel.cpp", "README.md"))
    assert parsed.files == {"kernel.cpp": KERNEL, "README.md": readme}


def test_language_word_is_optional_and_crlf_is_tolerated() -> None:
    text = answer(f"```file=kernel.cpp\n{KERNEL}```", ADOPTION).replace("\n", "\r\n")
    parsed = parse(text)
    assert parsed.files["kernel.cpp"].replace("\r", "") == KERNEL
    assert parsed.adoption == {3: AdoptionRecord(adopted=True, rationale="Vectorise the loop.")}


def test_no_shown_items_needs_no_adoption_block() -> None:
    parsed = parse(answer(f"```cpp file=kernel.cpp\n{KERNEL}```"), shown=())
    assert parsed.adoption == {} and parsed.complete


def test_unlabelled_code_blocks_are_ignored() -> None:
    parsed = parse(answer("```cpp\n// a sketch\n```", f"```cpp file=kernel.cpp\n{KERNEL}```", ADOPTION))
    assert parsed.files == {"kernel.cpp": KERNEL}


# --- errors ------------------------------------------------------------------------------------------


def parse_error(text: str, **kwargs) -> str:
    with pytest.raises(ParseError) as error:
        parse(text, **kwargs)
    return str(error.value)


def test_missing_file_says_how_to_label_it() -> None:
    message = parse_error(answer(f"```cpp\n{KERNEL}```", ADOPTION))
    assert "no code block for required file kernel.cpp" in message
    assert "```<lang> file=kernel.cpp" in message
    assert "1 code block(s) lack file=NAME" in message


def test_file_given_twice() -> None:
    block = f"```cpp file=kernel.cpp\n{KERNEL}```"
    assert "file kernel.cpp is given twice" in parse_error(answer(block, block, ADOPTION))


@pytest.mark.parametrize(
    "name", ["../kernel.cpp", "/etc/passwd", "src/kernel.cpp", "a..cpp", "..", "k\\x.cpp"]
)
def test_unsafe_file_names(name: str) -> None:
    message = parse_error(
        answer(f"```cpp file=kernel.cpp\n{KERNEL}```", f"```cpp file={name}\nx\n```", ADOPTION)
    )
    assert f"file name {name!r}" in message and "not allowed" in message


def test_unexpected_file() -> None:
    message = parse_error(
        answer(f"```cpp file=kernel.cpp\n{KERNEL}```", "```cpp file=helper.h\nint h;\n```", ADOPTION)
    )
    assert "unexpected file helper.h: the candidate consists of exactly kernel.cpp" in message


def test_empty_file_block() -> None:
    assert "the block for kernel.cpp (line 3) is empty" in parse_error(
        answer("```cpp file=kernel.cpp\n\n```", ADOPTION)
    )


def test_unclosed_block() -> None:
    message = parse_error(answer(ADOPTION, f"```cpp file=kernel.cpp\n{KERNEL}"))
    assert "opened on line 7 (```cpp file=kernel.cpp) is never closed" in message
    assert "no code block" not in message  # one problem, not two


def test_no_adoption_block_while_items_were_shown() -> None:
    message = parse_error(answer(f"```cpp file=kernel.cpp\n{KERNEL}```"), shown=(3, 5))
    assert "no adoption block" in message and "(3, 5)" in message


def test_untagged_adoption_block_gets_a_hint() -> None:
    untagged = ADOPTION.replace("```json", "```")
    assert "fence it as ```json" in parse_error(answer(f"```cpp file=kernel.cpp\n{KERNEL}```", untagged))


def test_two_json_blocks() -> None:
    message = parse_error(answer(f"```cpp file=kernel.cpp\n{KERNEL}```", ADOPTION, ADOPTION))
    assert "found 2 json blocks" in message


def test_invalid_json_says_where() -> None:
    broken = '```json\n{"adoption": [\n  {"id": 3, "adopted": true "rationale": "x"}\n]}\n```'
    message = parse_error(answer(f"```cpp file=kernel.cpp\n{KERNEL}```", broken))
    assert "not valid JSON: Expecting ',' delimiter at its line 2, column 29" in message


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ('[{"id": 3}]', 'must be a JSON object {"adoption": [ ... ]}'),
        ('{"adoption": {"id": 3}}', "with a list of records"),
        ('{"adoption": [7]}', "adoption record 1 must be an object"),
        ('{"adoption": [{"id": "3", "adopted": true, "rationale": "r"}]}', 'id must be an integer, got "3"'),
        (
            '{"adoption": [{"id": true, "adopted": true, "rationale": "r"}]}',
            "id must be an integer, got true",
        ),
        (
            '{"adoption": [{"id": 3, "adopted": "yes", "rationale": "r"}]}',
            'adopted must be true or false, got "yes"',
        ),
        ('{"adoption": [{"id": 3, "adopted": false}]}', "rationale must be a string, got null"),
        ('{"adoption": [{"id": 3, "adopted": false, "rationale": 5}]}', "rationale must be a string, got 5"),
        ('{"adoption": [{"id": 3, "adopted": false, "rationale": "  "}]}', "id 3: rationale is empty"),
    ],
)
def test_wrong_field_types(document: str, expected: str) -> None:
    message = parse_error(answer(f"```cpp file=kernel.cpp\n{KERNEL}```", f"```json\n{document}\n```"))
    assert expected in message


def test_duplicated_ids_are_an_error() -> None:
    document = '{"adoption": [{"id": 3, "adopted": true, "rationale": "a"}, {"id": 3, "adopted": false, "rationale": "b"}]}'
    message = parse_error(answer(f"```cpp file=kernel.cpp\n{KERNEL}```", f"```json\n{document}\n```"))
    assert "id 3 has more than one adoption record" in message


def test_all_problems_are_reported_together() -> None:
    message = parse_error("no blocks at all", files=("kernel.cpp", "kernel.h"))
    assert message.startswith("3 problems:\n- ")
    assert "kernel.cpp" in message and "kernel.h" in message and "no adoption block" in message


# --- the gate's re-ask and the feedback ----------------------------------------------------------------


def test_parse_adoption_only() -> None:
    reply = parse_adoption_only("Sorry:\n" + ADOPTION, shown_ids={3, 4})
    assert reply.adoption == {3: AdoptionRecord(adopted=True, rationale="Vectorise the loop.")}
    assert reply.missing_ids == [4] and not reply.complete

    with pytest.raises(ParseError, match="no adoption block"):
        parse_adoption_only("I adopt item 3.", shown_ids={3})


def test_feedback_carries_the_error_and_the_format() -> None:
    with pytest.raises(ParseError) as error:
        parse("nothing")
    feedback = format_parse_feedback(error.value)
    assert str(error.value) in feedback
    assert "file=NAME" in feedback and '"adoption"' in feedback


def test_answer_format_documents_the_rules() -> None:
    assert (
        "file=kernel.cpp" in ANSWER_FORMAT and '"adoption"' in ANSWER_FORMAT and "rationale" in ANSWER_FORMAT
    )


@pytest.mark.parametrize("rationale", ["One sentence on why it applies or not.", "one sentence on why it applies, or not",
                                       "..."])
def test_the_format_examples_placeholder_rationale_is_rejected(rationale: str) -> None:
    copied = ADOPTION.replace("Vectorise the loop.", rationale)
    message = parse_error(answer(f"```cpp file=kernel.cpp\n{KERNEL}```", copied), shown=(3,))
    assert "placeholder" in message and "id 3" in message
