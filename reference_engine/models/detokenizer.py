"""Incremental detokenization with stop strings. Torch-free.

Text is decoded from a short window of ids (a few context ids plus the new ones) so each step costs
O(window), and a delta is released only when it does not end in a partial UTF-8 / byte-fallback
character. With stop strings, the last ``len(longest stop) - 1`` characters are held back until it
is certain they do not begin a stop string, so a client never sees text past a stop.
"""
from __future__ import annotations

CONTEXT_TOKENS = 5


class IncrementalDetokenizer:
    def __init__(self, tokenizer, prompt_token_ids: list[int], stop: tuple[str, ...] = ()):
        self.tokenizer = tokenizer
        self.ids: list[int] = list(prompt_token_ids[-CONTEXT_TOKENS:])
        self.prefix_offset = 0
        self.read_offset = len(self.ids)
        self.text = ""
        self.num_emitted_chars = 0
        self.stop = tuple(stop)
        self.max_stop_chars = max((len(s) for s in self.stop), default=0)
        self.stopped_by: str | None = None

    def clone(self) -> IncrementalDetokenizer:
        other = IncrementalDetokenizer(self.tokenizer, [], self.stop)
        other.ids = list(self.ids)
        other.prefix_offset, other.read_offset = self.prefix_offset, self.read_offset
        other.text, other.num_emitted_chars = self.text, self.num_emitted_chars
        return other

    def add_token(self, token_id: int, check_stop: bool = True) -> bool:
        """Append one generated id; return True if a stop string now appears (text is cut before it)."""
        self.ids.append(token_id)
        prefix_text = self.tokenizer.decode(self.ids[self.prefix_offset:self.read_offset])
        new_text = self.tokenizer.decode(self.ids[self.prefix_offset:])
        if len(new_text) > len(prefix_text) and not new_text.endswith("\ufffd"):
            old_len = len(self.text)
            self.text += new_text[len(prefix_text):]
            self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
            if check_stop and self.stop:
                return self._find_stop(old_len)
        return False

    def _find_stop(self, old_len: int) -> bool:
        start = max(0, old_len - self.max_stop_chars + 1)
        best: tuple[int, str] | None = None
        for s in self.stop:
            idx = self.text.find(s, start)
            if idx >= 0 and (best is None or idx < best[0]):
                best = (idx, s)
        if best is None:
            return False
        self.text = self.text[:best[0]]
        self.stopped_by = best[1]
        return True

    def flush(self) -> None:
        """At the end of a request, release text still held back for an incomplete character."""
        if self.read_offset < len(self.ids):
            prefix_text = self.tokenizer.decode(self.ids[self.prefix_offset:self.read_offset])
            new_text = self.tokenizer.decode(self.ids[self.prefix_offset:])
            self.text += new_text[len(prefix_text):]
            self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)

    def take_delta(self, finished: bool) -> str:
        """Text not yet emitted that is safe to emit now."""
        end = len(self.text) if finished else max(self.num_emitted_chars, len(self.text) - max(self.max_stop_chars - 1, 0))
        delta = self.text[self.num_emitted_chars:end]
        self.num_emitted_chars = end
        return delta
