"""What counting tokens by script costs against characters over four, in the
same run. Every model call estimates its request (compaction), every tool
result is estimated before it goes into the context (spilling), so the
estimate must stay a small part of a call on texts of megabytes: a megabyte
of Chinese, of English in ASCII, of English with one accented letter (no fast
path) and of the two scripts mixed; then a whole request at a 128,000-token
window, as the engine estimates it before each call.

Runs without Django: `PYTHONPATH=. python benchmarks/tokens.py`.
"""

import time

from agents.tokens import messages_tokens, tokens_estimate

SIZE = 1_000_000
REPEAT = 20
CHINESE = "在预写日志模式下，读者不会阻塞写者，写者也不会阻塞读者；检查点把日志写回数据库文件。"
ENGLISH = "In WAL mode readers do not block the writer, and the writer does not block readers. "
MIXED = "SQLite 的 WAL 模式让读者不阻塞写者 (readers never block the writer); 检查点 copies the log back. "


def _text(sentence: str) -> str:
    return (sentence * (SIZE // len(sentence) + 1))[:SIZE]


def _seconds(function) -> float:
    """The best of REPEAT runs: the least disturbed by the rest of the machine."""
    best = float("inf")
    for _ in range(REPEAT):
        started = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - started)
    return best


def main():
    texts = {
        "Chinese": _text(CHINESE),
        "English (ASCII)": _text(ENGLISH),
        "English, one é": "é" + _text(ENGLISH)[1:],
        "mixed": _text(MIXED),
    }
    print(f"token estimate of 1 MB ({SIZE:,} characters), best of {REPEAT}, against len(text) // 4:")
    for name, text in texts.items():
        ours = _seconds(lambda text=text: tokens_estimate(text=text))
        baseline = _seconds(lambda text=text: len(text) // 4)
        print(
            f"  {name:<17} {ours * 1e6:9,.1f} µs vs {baseline * 1e6:4.1f} µs ({ours / baseline:,.0f}x): "
            f"{tokens_estimate(text=text):>9,} tokens, characters over four said {len(text) // 4:,}"
        )
    # A request near a 128,000-token window: a system prompt and 60 Chinese and English messages.
    message = _text(CHINESE)[:1_000] + _text(ENGLISH)[:4_000]
    messages = [{"role": "system", "content": _text(ENGLISH)[:12_000]}] + [
        {"role": "user" if n % 2 else "assistant", "content": message} for n in range(60)
    ]
    seconds = _seconds(lambda: messages_tokens(messages=messages))
    chars = sum(len(m["content"]) for m in messages)
    print(
        f"  a request of {len(messages)} messages, {chars:,} characters: {seconds * 1000:.3f} ms, "
        f"{messages_tokens(messages=messages):,} tokens"
    )


if __name__ == "__main__":
    main()
