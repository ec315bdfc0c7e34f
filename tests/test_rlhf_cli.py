"""`ppo-rlhf` refuses bad input with one line on stderr and exit code 2, before any work."""

import pytest

from experiments.commands.rlhf import main


def exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as stop:  # argparse's own errors exit from inside parse_args
        return stop.code


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--target-food", "burger"], "target_food = 'burger' is not a food of the corpus"),
        (["--person", "bob"], "person = 'bob' is not in the corpus"),
        (["--kl-coef", "-1"], "kl_coef = -1.0 must be a finite number ≥ 0"),
        (["--batch-size", "30", "--num-minibatches", "4"], "batch_size = 30 is not divisible by num_minibatches = 4"),
        (["--kl-penalty", "k3"], "kl_penalty = 'k3' is not one of auto, reward-k1, loss-full, loss-k3"),
        (["--kl-estimator", "k3"], "--kl-estimator k3 was replaced by --kl-penalty (reward-k1, loss-full, loss-k3)"),
        (["--iterations", "ten"], "invalid int value"),
        (["--algorithm", "rloo", "--norm-adv"], "norm_adv = True has no effect with algorithm = 'rloo': the group "
                                                "baseline scales Â itself"),
        (["--algorithm", "grpo", "--whiten-rewards"], "whiten_rewards = True has no effect with algorithm = 'grpo'"),
        (["--algorithm", "rloo", "--critic", "shared"], "critic = 'shared' has no effect with algorithm = 'rloo': "
                                                        "they train no critic"),
        (["--algorithm", "grpo", "--critic-learning-rate", "0.01"], "critic_learning_rate = 0.01 has no effect"),
        (["--algorithm", "rloo", "--vf-coef", "0.5"], "vf_coef = 0.5 has no effect with algorithm = 'rloo'"),
        (["--algorithm", "rloo", "--value-clip-coef", "none"], "value_clip_coef = None has no effect"),
        (["--algorithm", "grpo", "--gamma", "0.99"], "gamma = 0.99 has no effect with algorithm = 'grpo': they "
                                                     "compute no GAE"),
        (["--algorithm", "rloo", "--gae-lambda", "1.0"], "gae_lambda = 1.0 has no effect"),
    ],
)
def test_user_mistakes_get_one_line_and_exit_code_2(argv, message, capsys, tmp_path):
    assert exit_code([*argv, "--run-dir", str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("ppo-rlhf: error:") and message in error
    assert not (tmp_path / "run").exists()  # nothing was started


def test_a_setting_the_model_refuses_leaves_the_folders_as_they_were(tmp_path, monkeypatch, capsys):
    """max_new_tokens is checked against the SFT model's context, after the run folder is claimed:
    the refusal must still leave no run folder (nor runs/) behind."""
    from _tiny_lm import tiny_sft

    from experiments.commands import rlhf

    monkeypatch.setattr(rlhf, "load_or_pretrain_sft", lambda *args, **kwargs: tiny_sft())
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cache").mkdir()
    for where in ([], ["--run-dir", "runs/mine"]):
        assert exit_code(["--max-new-tokens", "40", "--no-progress", "--sft-cache-dir", "cache", *where]) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and "max_new_tokens = 40 does not fit" in error, error
        assert sorted(path.name for path in tmp_path.rglob("*")) == ["cache"]


def test_a_resume_that_leaves_nothing_to_train_is_refused_and_changes_nothing(tmp_path, monkeypatch, capsys):
    from _tiny_lm import tiny_sft

    from experiments.commands import rlhf

    monkeypatch.setattr(rlhf, "load_or_pretrain_sft", lambda *args, **kwargs: tiny_sft())
    run_dir = tmp_path / "run"
    tiny = ["--batch-size", "8", "--num-minibatches", "2", "--max-new-tokens", "6", "--eval-samples", "8",
            "--no-progress", "--no-tensorboard", "--sft-cache-dir", str(tmp_path / "cache")]
    assert exit_code(["--iterations", "2", "--run-dir", str(run_dir), *tiny]) == 0
    capsys.readouterr()
    before = {path.name: path.read_bytes() for path in run_dir.iterdir() if path.is_file()}
    for argv, message in (
        (["--iterations", "2"], f"--iterations 2 leaves nothing to train: run {run_dir} has done 2 iterations; "
                                "give --iterations 3 or more"),
        ([], f"run {run_dir} is complete (2 iterations); to train it further give --iterations 3 or more"),
    ):
        assert exit_code(["--resume", str(run_dir), "--no-progress", *argv]) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and message in error, error
        assert {path.name: path.read_bytes() for path in run_dir.iterdir() if path.is_file()} == before


def test_the_reward_model_is_normalised_and_measured_on_samples_at_the_run_temperature(monkeypatch):
    """The learned score is shifted and scaled on the SFT model's completions, and the final learned-score figure
    averages fresh completions: both drawn at --temperature, the distribution PPO samples from, not at τ = 1."""
    import inspect

    from _tiny_lm import tiny_sft

    from experiments.commands import rlhf
    from experiments.tasks.food_task import FoodTaskConfig
    from ppo.lm.trainers.rlhf_config import RLHFConfig

    temperatures = []
    signature = inspect.signature(rlhf.sample_completions)

    def recording(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        temperatures.append(bound.arguments["temperature"])
        return sample(*args, **kwargs)

    sample = rlhf.sample_completions
    monkeypatch.setattr(rlhf, "sample_completions", recording)
    sft, tokenizer = tiny_sft()
    task_config = FoodTaskConfig(reward="model", reward_model_pairs=16, reward_model_steps=2)
    config = RLHFConfig(temperature=0.7, max_new_tokens=8)
    reward_model, _ = rlhf._train_reward_model(task_config, config, sft, tokenizer, task_config.prompts(), False)

    class Trainer:  # what _mean_learned_score reads of a trainer
        reference = policy = sft

    rlhf._mean_learned_score(reward_model, Trainer(), "ppo", tokenizer, task_config.prompts(), config, 8)
    assert temperatures == [0.7, 0.7]
