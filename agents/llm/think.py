"""Thinking written inline in a model's answer text, `<think>…</think>`, as
DeepSeek-R1 and Qwen models served without a reasoning parser write it,
split off from the answer as the stream arrives."""

OPEN, CLOSE = "<think>", "</think>"
_START, _THINKING, _ANSWER = "start", "thinking", "answer"


class ThinkSplitter:
    """Feeds on an answer's streamed text and hands back (reasoning, content).

    Only a think block at the very start of the answer (whitespace aside) is
    thinking: `<think>` later in prose is prose. A tag may be cut anywhere
    between two pieces, so a piece that could be the start of one is held
    back until the next piece tells. Thinking left open when the stream ends
    is thinking (`finish`)."""

    def __init__(self):
        self._state = _START
        self._held = ""
        # After thinking, the blank lines a model writes before its answer do not open it.
        self._trim = False

    def feed(self, text: str) -> tuple[str, str]:
        self._held += text
        reasoning = content = ""
        if self._state == _START:
            begun = self._held.lstrip()
            if begun.startswith(OPEN):
                self._state, self._held = _THINKING, begun[len(OPEN) :]
            elif OPEN.startswith(begun):
                return "", ""  # whitespace, or a tag's first characters: wait for more
            else:
                self._state = _ANSWER
        if self._state == _THINKING:
            at = self._held.find(CLOSE)
            if at < 0:
                keep = _tag_start_length(self._held, CLOSE)
                reasoning, self._held = self._held[: len(self._held) - keep], self._held[len(self._held) - keep :]
                return reasoning, ""
            reasoning, self._held = self._held[:at], self._held[at + len(CLOSE) :]
            self._state, self._trim = _ANSWER, True
        if self._state == _ANSWER:
            content, self._held = (self._held.lstrip() if self._trim else self._held), ""
            self._trim = self._trim and not content
        return reasoning, content

    def finish(self) -> tuple[str, str]:
        """What is still held when the stream has ended, as (reasoning, content)."""
        held, self._held = self._held, ""
        return (held, "") if self._state == _THINKING else ("", held)


def _tag_start_length(text: str, tag: str) -> int:
    """How many of the last characters of `text` could begin `tag`."""
    return next((k for k in range(len(tag) - 1, 0, -1) if text.endswith(tag[:k])), 0)
