"""The token estimate every budget for a model goes by, in every script."""

import pytest

from agents.tokens import messages_tokens, tokens_estimate, tokens_prefix

CHINESE = "在预写日志模式下，读者不会阻塞写者，写者也不会阻塞读者。"
ENGLISH = "In WAL mode readers do not block the writer, and the writer does not block readers."


def test_a_chinese_character_is_about_a_token_and_so_is_its_punctuation():
    assert tokens_estimate(text=CHINESE) == len(CHINESE) == 28


def test_english_is_about_four_characters_a_token():
    assert tokens_estimate(text=ENGLISH) == 21  # 83 characters
    assert tokens_estimate(text="") == 0


@pytest.mark.parametrize(
    "text, tokens",
    [
        # Hiragana, katakana and kanji: 「データベース」 is seven characters, seven tokens.
        ("東京のデータベースは、ログ先行書き込みを使います。", 25),
        # Hangul syllables count one each; the spaces and the full stop are Latin-like.
        ("데이터베이스는 미리 쓰기 로그를 사용합니다.", 19 + 2),
        # Extension A (㐀), extension B (𠀀) and a compatibility ideograph (豈).
        ("㐀𠀀豈", 3),
        # Full-width forms: ！（ＳＱＬ）
        ("！（ＳＱＬ）", 6),
    ],
)
def test_japanese_korean_and_the_rarer_han_blocks_are_a_token_a_character(text, tokens):
    assert tokens_estimate(text=text) == tokens


def test_mixed_text_counts_each_script_its_own_way():
    mixed = "SQLite 的 WAL 模式让读者不阻塞写者 (readers never block)."
    wide = len("的模式让读者不阻塞写者")
    assert tokens_estimate(text=mixed) == wide + -(-(len(mixed) - wide) // 4)
    # Latin letters with accents are not wide: a French sentence costs what an English one does.
    assert tokens_estimate(text="Les lecteurs ne bloquent pas l'écrivain.") == 10


def test_a_megabyte_of_chinese_is_four_times_what_characters_over_four_said():
    text = (CHINESE * 40_000)[:1_000_000]
    assert tokens_estimate(text=text) == 1_000_000
    assert tokens_estimate(text=(ENGLISH * 20_000)[:1_000_000]) == 250_000


def test_messages_count_their_tool_calls_and_a_few_tokens_each():
    call = {"id": "c1", "type": "function", "function": {"name": "web_fetch", "arguments": '{"url": "https://x"}'}}
    messages = [
        {"role": "system", "content": ENGLISH},
        {"role": "user", "content": CHINESE},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    tools = messages_tokens(messages=messages) - messages_tokens(messages=[*messages[:2], {"role": "assistant"}])
    assert messages_tokens(messages=messages[:2]) == 21 + 28 + 2 * 4
    assert tools >= 20


@pytest.mark.parametrize("text", [CHINESE * 100, ENGLISH * 100, (CHINESE + ENGLISH) * 50])
def test_a_prefix_is_the_longest_start_within_the_tokens(text):
    for budget in (1, 7, 500, 2_000):
        prefix = tokens_prefix(text=text, tokens=budget)
        assert text.startswith(prefix) and tokens_estimate(text=prefix) <= budget
        assert tokens_estimate(text=text[: len(prefix) + 1]) > budget
    assert tokens_prefix(text=text, tokens=10**6) == text
