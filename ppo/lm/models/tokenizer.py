"""A character-level tokenizer: one token per character plus three special tokens.

Ids 0, 1, 2 are BOS (begin of sequence), EOS (end of sequence) and PAD (filler
after a sequence ends, never a training target); characters follow in sorted order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

SPECIAL_MARK = "\ufffd"  # how a BOS or PAD inside a completion's text shows (never a corpus character)

BOS_TOKEN, EOS_TOKEN, PAD_TOKEN = "<bos>", "<eos>", "<pad>"
SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, PAD_TOKEN)


class CharTokenizer:
    """Maps text to integer ids and back, one id per character."""

    def __init__(self, characters: Iterable[str]):
        chars = sorted(set(characters))
        for ch in chars:
            if len(ch) != 1:
                raise ValueError(f"vocabulary entries must be single characters, got {ch!r}")
        self.characters: list[str] = chars
        self.bos_id, self.eos_id, self.pad_id = 0, 1, 2
        self._id_of = {ch: i + len(SPECIAL_TOKENS) for i, ch in enumerate(chars)}
        self._char_of = {i: ch for ch, i in self._id_of.items()}

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> CharTokenizer:
        """Vocabulary = every character that occurs in the texts."""
        return cls(set("".join(texts)))

    @property
    def vocab_size(self) -> int:
        return len(SPECIAL_TOKENS) + len(self.characters)

    @property
    def special_ids(self) -> tuple[int, int, int]:
        return (self.bos_id, self.eos_id, self.pad_id)

    def encode(self, text: str, add_bos: bool = True, add_eos: bool = False) -> list[int]:
        """"ab" -> [BOS, id(a), id(b)] (+ [EOS] if add_eos)."""
        ids = [self.bos_id] if add_bos else []
        for ch in text:
            if ch not in self._id_of:
                allowed = "".join(self.characters)
                raise ValueError(f"character {ch!r} is not in the vocabulary; allowed: {allowed!r}")
            ids.append(self._id_of[ch])
        if add_eos:
            ids.append(self.eos_id)
        return ids

    def decode(self, ids: Sequence[int] | Iterable[int], stop_at_eos: bool = True) -> str:
        """Ids -> text. BOS and PAD are skipped; EOS ends the text (or is skipped if stop_at_eos=False)."""
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                if stop_at_eos:
                    break
                continue
            if i in (self.bos_id, self.pad_id):
                continue
            if i not in self._char_of:
                raise ValueError(f"token id {i} is outside the vocabulary (size {self.vocab_size})")
            out.append(self._char_of[i])
        return "".join(out)

    def decode_completion(self, ids: Sequence[int] | Iterable[int]) -> str:
        """The text of a generated completion, up to EOS, with nothing hidden: a BOS or PAD
        inside it becomes SPECIAL_MARK, so "piz<pad>za" can never read as "pizza"."""
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            out.append(SPECIAL_MARK if i in (self.bos_id, self.pad_id) else self.decode([i]))
        return "".join(out)

    def state_dict(self) -> dict[str, list[str]]:
        """Plain lists of strings, safe to store in a weights_only checkpoint."""
        return {"special_tokens": list(SPECIAL_TOKENS), "characters": list(self.characters)}

    @classmethod
    def from_state_dict(cls, state: dict) -> CharTokenizer:
        if list(state.get("special_tokens", [])) != list(SPECIAL_TOKENS) or "characters" not in state:
            raise ValueError(f"not a CharTokenizer state dict: keys {sorted(state)}")
        return cls(state["characters"])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharTokenizer) and self.characters == other.characters

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size}, characters={''.join(self.characters)!r})"
