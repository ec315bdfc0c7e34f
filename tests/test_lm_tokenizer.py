import pytest
import torch

from envs import corpus
from ppo.lm.models.tokenizer import CharTokenizer


def test_hand_worked_ids():
    tok = CharTokenizer("ba ")  # specials 0, 1, 2; then sorted characters: " "=3, "a"=4, "b"=5
    assert tok.vocab_size == 6
    assert tok.encode("ab a") == [0, 4, 5, 3, 4]
    assert tok.encode("ab", add_bos=False, add_eos=True) == [4, 5, 1]
    assert tok.decode([0, 4, 5, 1, 4]) == "ab"  # stops at EOS
    assert tok.decode([0, 4, 2, 5, 1, 4], stop_at_eos=False) == "aba"  # BOS, PAD, EOS skipped


def test_special_ids_are_distinct_and_not_characters():
    tok = CharTokenizer(corpus.corpus_characters())
    assert len({tok.bos_id, tok.eos_id, tok.pad_id}) == 3
    char_ids = set(tok.encode(corpus.corpus_characters(), add_bos=False))
    assert char_ids.isdisjoint(tok.special_ids)
    assert len(char_ids) == len(corpus.corpus_characters())


def test_round_trip_on_every_corpus_sentence():
    tok = CharTokenizer(corpus.corpus_characters())
    for sentence in sorted(set(corpus.sample_sentences(2000, seed=0))):
        ids = tok.encode(sentence, add_bos=True, add_eos=True)
        assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id and len(ids) == len(sentence) + 2
        assert tok.decode(ids) == sentence


def test_unknown_character_error_names_it():
    tok = CharTokenizer("abc ")
    with pytest.raises(ValueError, match="'Z'") as info:
        tok.encode("abZ")
    message = str(info.value)
    assert "\n" not in message and "' abc'" in message


def test_state_dict_survives_weights_only_load(tmp_path):
    tok = CharTokenizer(corpus.corpus_characters())
    torch.save(tok.state_dict(), tmp_path / "tok.pt")
    restored = CharTokenizer.from_state_dict(torch.load(tmp_path / "tok.pt", weights_only=True))
    assert restored == tok and restored.encode("ravin likes pizza") == tok.encode("ravin likes pizza")
