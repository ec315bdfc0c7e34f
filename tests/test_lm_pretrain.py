import math
from dataclasses import asdict, replace

import pytest
import torch
import torch.nn.functional as F

from envs.corpus import FOOD_CORPUS
from experiments.commands import pretrain_lm
from ppo.runs.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from ppo.config import ConfigError
from ppo.lm.models import pretrain as pretrain_module
from ppo.lm.models.pretrain import (
    PretrainingInterrupted,
    PretrainConfig,
    cached_checkpoint_path,
    load_or_pretrain_sft,
    load_sft_checkpoint,
    next_token_loss,
    pretrain,
    save_sft_checkpoint,
    scheduled_learning_rate,
)


TINY = PretrainConfig(seed=0, corpus_size=6000, val_size=500, steps=120, batch_size=64, learning_rate=1e-2,
                      warmup_steps=10, eval_interval=60, n_layer=1, n_head=2, n_embd=32)


@pytest.fixture(scope="module")
def trained():
    return pretrain(FOOD_CORPUS, TINY, verbose=False)


def test_short_pretraining_beats_the_uniform_model(trained):
    log_v = math.log(trained.tokenizer.vocab_size)
    assert trained.val_loss < 0.35 * log_v
    assert [h["step"] for h in trained.history] == [60, 120]
    assert not trained.model.training


def test_pretraining_is_seeded():
    short = replace(TINY, steps=10, eval_interval=10, warmup_steps=5)
    first, second = pretrain(FOOD_CORPUS, short, verbose=False), pretrain(FOOD_CORPUS, short, verbose=False)
    other_seed = pretrain(FOOD_CORPUS, replace(short, seed=1), verbose=False)
    assert first.val_loss == second.val_loss != other_seed.val_loss


def test_loss_ignores_pad_targets():
    torch.manual_seed(0)
    tok = pretrain_module.corpus_tokenizer(FOOD_CORPUS)
    model = pretrain_module.GPT(TINY.gpt_config(tok.vocab_size)).eval()
    batch = pretrain_module.encode_corpus(["sam likes soda", "priya hates ice cream"], tok, TINY.block_size)
    assert (batch[0] == tok.pad_id).sum() > 0  # the short sentence is padded
    with torch.no_grad():
        logits = model(batch[:, :-1])
        terms = [-F.log_softmax(logits[b, t], -1)[batch[b, t + 1]] for b in range(2)
                 for t in range(batch.size(1) - 1) if batch[b, t + 1] != tok.pad_id]
        assert next_token_loss(model, batch, tok.pad_id).item() == pytest.approx(torch.stack(terms).mean().item(),
                                                                                  rel=1e-5)


def test_learning_rate_schedule_by_hand():
    cfg = PretrainConfig(steps=110, warmup_steps=10, learning_rate=1.0, min_lr_ratio=0.1)
    assert scheduled_learning_rate(0, cfg) == pytest.approx(0.1)
    assert scheduled_learning_rate(9, cfg) == pytest.approx(1.0)
    assert scheduled_learning_rate(10, cfg) == pytest.approx(1.0)
    assert scheduled_learning_rate(60, cfg) == pytest.approx(0.1 + 0.9 * 0.5)  # halfway: cos(pi/2) = 0
    assert scheduled_learning_rate(110, cfg) == pytest.approx(0.1)


def test_checkpoint_round_trip_weights_only(trained, tmp_path):
    path = save_sft_checkpoint(trained.model, trained.tokenizer, tmp_path / "sft.pt", TINY, {"val_loss": 1.5})
    raw = load_checkpoint(path)  # torch.load(weights_only=True) underneath: plain containers only
    assert raw["pretrain_config"] == asdict(TINY) and isinstance(raw["gpt_config"], dict)
    loaded = load_sft_checkpoint(path)
    assert loaded.pretrain_config == TINY and loaded.tokenizer == trained.tokenizer
    assert loaded.metrics == {"val_loss": 1.5}
    idx = torch.tensor([trained.tokenizer.encode("ravin likes pizza")])
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(idx), trained.model(idx), atol=0, rtol=0)
    assert loaded.model.lm_head.weight is loaded.model.token_embedding.weight  # still tied
    assert not list(tmp_path.glob("*.tmp"))  # the temporary file was renamed away


def test_corrupt_checkpoint_raises_clear_error(trained, tmp_path):
    path = save_sft_checkpoint(trained.model, trained.tokenizer, tmp_path / "sft.pt", TINY)
    path.write_bytes(path.read_bytes()[:200])  # truncated
    with pytest.raises(CheckpointError, match="is corrupt"):
        load_sft_checkpoint(path)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError):
        load_sft_checkpoint(tmp_path / "junk.pt")
    with pytest.raises(CheckpointError, match="does not exist"):
        load_sft_checkpoint(tmp_path / "missing.pt")


def test_mismatched_checkpoint_raises_clear_error(trained, tmp_path):
    path = save_sft_checkpoint(trained.model, trained.tokenizer, tmp_path / "sft.pt", TINY)
    payload = load_checkpoint(path)
    payload["gpt_config"]["n_embd"] = 64
    save_checkpoint(payload, path)
    with pytest.raises(CheckpointError, match="do not match"):
        load_sft_checkpoint(path)
    torch.save({"something": "else"}, path)
    with pytest.raises(CheckpointError, match="not a checkpoint of this project"):
        load_sft_checkpoint(path)  # the file format of ppo.runs.checkpoint; the SFT payload has a version of its own


def test_load_or_pretrain_caches_by_config(trained, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(pretrain_module, "pretrain", lambda corpus, config, verbose, **_: calls.append(config) or trained)
    monkeypatch.setenv("PPO_CACHE_DIR", str(tmp_path))
    model, tok = load_or_pretrain_sft(FOOD_CORPUS, TINY, verbose=False)  # trains (the stub) and saves
    assert calls == [TINY] and cached_checkpoint_path(FOOD_CORPUS, TINY).parent == tmp_path
    assert cached_checkpoint_path(FOOD_CORPUS, TINY).exists()
    model2, tok2 = load_or_pretrain_sft(FOOD_CORPUS, TINY, verbose=False)  # loads, no training
    assert calls == [TINY] and tok2 == tok
    other = replace(TINY, seed=1)
    assert cached_checkpoint_path(FOOD_CORPUS, other) != cached_checkpoint_path(FOOD_CORPUS, TINY)


@pytest.mark.parametrize("argv, message", [
    (["--learning-rate", "-1"], "learning_rate = -1.0 must be a finite number > 0"),
    (["--steps", "0"], "steps = 0 must be a positive integer"),
    (["--weight-decay", "nan"], "weight_decay = nan must be a finite number ≥ 0"),
    (["--max-grad-norm", "nan"], "max_grad_norm = nan must be a finite number > 0"),
    (["--n-embd", "30", "--n-head", "4"], "n_embd = 30 is not divisible by n_head = 4"),
    (["--lr", "1e-3"], "unrecognized arguments: --lr"),
])
def test_cli_rejects_bad_values_with_one_line_and_exit_code_2(argv, message, capsys, tmp_path):
    try:
        code = pretrain_lm.main([*argv, "--cache-dir", str(tmp_path)])
    except SystemExit as stop:  # argparse's own errors exit from inside parse_args
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("ppo-pretrain-lm: error:") and message in err
    assert not list(tmp_path.iterdir())  # nothing was trained or written


def test_config_rejects_bad_values():
    with pytest.raises(ConfigError, match="learning_rate"):
        PretrainConfig(learning_rate=-1.0).validate()
    with pytest.raises(ConfigError, match="val_size"):
        PretrainConfig(corpus_size=100, val_size=100).validate()


def test_cli_trains_and_reports(tmp_path, capsys):
    argv = ["--steps", "20", "--warmup-steps", "5", "--eval-interval", "10", "--corpus-size", "3000", "--val-size", "200",
            "--batch-size", "32", "--n-embd", "16", "--samples", "20", "--cache-dir", str(tmp_path),
            "--out", str(tmp_path / "copy.pt")]
    assert pretrain_lm.main(argv) == 0
    out = capsys.readouterr().out
    assert "ravin likes pizza" in out and "uniform model log V" in out
    assert len(list(tmp_path.glob("sft-*.pt"))) == 1 and load_sft_checkpoint(tmp_path / "copy.pt").pretrain_config


def test_interrupted_pretraining_resumes_to_the_same_model(trained, tmp_path):
    partial = tmp_path / "sft.partial.pt"
    steps_done = []

    def stop_after_50() -> bool:
        steps_done.append(1)
        return len(steps_done) == 50

    with pytest.raises(PretrainingInterrupted, match="stopped after step 50"):
        pretrain(FOOD_CORPUS, TINY, verbose=False, stop=stop_after_50, partial_path=partial)
    assert partial.exists()
    resumed = pretrain(FOOD_CORPUS, TINY, verbose=False, partial_path=partial)
    for name, tensor in trained.model.state_dict().items():
        assert torch.equal(tensor, resumed.model.state_dict()[name]), name
    assert resumed.history == trained.history
