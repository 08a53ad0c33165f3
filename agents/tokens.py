"""How many tokens a text costs a model, estimated the same way for every
script and everywhere text is budgeted for a model: compaction, tool results
stored as artifacts, read windows and previews.

A model's tokenizer spends about one token on a Han character, a kana or a
Hangul syllable, and about one on four characters of Latin, Cyrillic or code.
No tokenizer is loaded: each model has its own, and the usual ones download
their vocabularies at run time. Where the model service reports what a request
cost (`usage.prompt_tokens`), compaction goes by that and only estimates what
was added since (agents/compaction.py).
"""

import json
import re

# Characters a tokenizer spends about a token on each: CJK punctuation, kana,
# Bopomofo, Hangul (syllables and jamo), Han (unified ideographs with every
# extension, radicals, compatibility ideographs) and full- and half-width forms.
_WIDE = re.compile(
    "["
    "\u1100-\u11ff"  # Hangul jamo
    "\u2e80-\u2fdf"  # CJK and Kangxi radicals
    "\u3000-\u303f"  # CJK symbols and punctuation: 、。「」
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3100-\u31ff"  # Bopomofo, Hangul compatibility jamo, kanbun, katakana extensions
    "\u3400-\u4dbf"  # Han extension A
    "\u4e00-\u9fff"  # Han
    "\ua960-\ua97f"  # Hangul jamo extended-A
    "\uac00-\ud7ff"  # Hangul syllables, jamo extended-B
    "\uf900-\ufaff"  # Han compatibility ideographs
    "\ufe30-\ufe4f"  # CJK compatibility forms
    "\uff00-\uffef"  # full-width and half-width forms: ，！（）
    "\U00020000-\U0003134f"  # Han extensions B to G and the compatibility supplement
    "]+"
)
# Characters of other scripts per token.
CHARS_PER_TOKEN = 4
# What a chat format adds around each message (its role and delimiters).
MESSAGE_TOKENS = 4


def tokens_estimate(*, text: str) -> int:
    """About the tokens `text` costs a model, in one pass at C speed."""
    if text.isascii():
        return -(-len(text) // CHARS_PER_TOKEN)
    # Runs, not single characters: a page of Chinese is a few thousand matches, not a million.
    wide = sum(map(len, _WIDE.findall(text)))
    return wide + -(-(len(text) - wide) // CHARS_PER_TOKEN)


def messages_tokens(*, messages: list[dict]) -> int:
    """About the tokens chat `messages` cost, tool calls included."""
    tokens = 0
    for message in messages:
        tokens += MESSAGE_TOKENS + tokens_estimate(text=message.get("content") or "")
        if message.get("tool_calls"):
            tokens += tokens_estimate(text=json.dumps(message["tool_calls"], ensure_ascii=False))
    return tokens


def tokens_prefix(*, text: str, tokens: int) -> str:
    """The longest start of `text` estimated at no more than `tokens`."""
    # Every character costs at least a quarter token and at most one, which bounds the cut.
    if len(text) <= tokens or tokens_estimate(text=text) <= tokens:
        return text
    low, high = tokens, min(len(text), tokens * CHARS_PER_TOKEN)
    while low < high:
        middle = (low + high + 1) // 2
        if tokens_estimate(text=text[:middle]) <= tokens:
            low = middle
        else:
            high = middle - 1
    return text[:low]
