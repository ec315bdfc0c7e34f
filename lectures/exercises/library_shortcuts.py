"""Which library code each exercise must not call: the answer it asks you to write.

An exercise that asks for GAE is not done by calling `ppo.algorithm.advantages.compute_gae`. The
table below names, for every exercise function, the library names that implement it; the
`exercise` fixture (conftest.py) reads the exercise module's source and fails every check
of that module when it imports one of them, or one of the solutions, or reaches it as a
dotted name (`ppo.algorithm.advantages.compute_gae(...)`), or imports it by a string
(`importlib.import_module("ppo.algorithm.advantages")`). Checks may use the library freely: they
compare your answer with it.

A name is a dotted path to a module or to an object in it. An import is refused when it
brings in a forbidden name, or a module or package that contains one (`from ppo import
losses`, `import ppo.algorithm.losses as L`). A name beginning with "." is a method or attribute
that the exercise function must not call (".backward": no autograd in it).

This is a guard against shortcuts taken by accident, not a sandbox: code that tries hard
enough can always reach the library.
"""

from __future__ import annotations

import ast
from pathlib import Path

# The solutions are off limits to every exercise module.
SOLUTIONS = ("solutions",)

# exercise module → exercise function → the library names that implement it
FORBIDDEN: dict[str, dict[str, tuple[str, ...]]] = {
    "lecture_01": {
        "rewards_to_go": ("ppo.algorithm.advantages",),
    },
    "lecture_02": {
        "explained_variance": ("ppo.algorithm.losses.explained_variance",),
    },
    "lecture_03": {
        "td_errors": ("ppo.algorithm.advantages",),
        "gae": ("ppo.algorithm.advantages", "ppo.trainers.ppo"),
        "lambda_return": ("ppo.algorithm.advantages",),
        "predict_best_lambda": ("ppo.algorithm.advantages",),
    },
    "lecture_04": {
        "conjugate_gradient": ("torch.linalg", "torch.inverse", "torch.cholesky_solve", "torch.cholesky_inverse"),
        "natural_gradient_step": ("torch.linalg", "torch.inverse", "torch.cholesky_solve", "torch.cholesky_inverse"),
    },
    "lecture_05": {
        "clipped_surrogate_loss": ("ppo.algorithm.losses.clipped_surrogate_loss", "ppo.algorithm.losses.transition_loss", "ppo.trainers.ppo",
                                   "ppo.trainers.variants"),
        "clip_fraction": ("ppo.algorithm.losses.clip_fraction", "ppo.algorithm.losses.log_ratio_clip_fraction", "ppo.algorithm.update"),
        "predict_surrogate_gradient": ("ppo.algorithm.losses.clipped_surrogate_loss",),
    },
    "lecture_06": {
        "update_sizes": ("ppo.config", "ppo.presets", "experiments.commands.presets"),
        "learning_rate": ("ppo.parallel.optim.linear_annealing", "ppo.trainers.base"),
        "finished_episode_returns": ("ppo.trainers.ppo",),
    },
    "lecture_07": {
        "approx_kl": ("ppo.algorithm.losses.kl_estimate", "ppo.algorithm.losses.kl_per_sample", "ppo.algorithm.update"),
        "gradient_steps_taken": ("ppo.algorithm.update",),
    },
    "lecture_08": {
        "whiten": ("ppo.algorithm.losses.normalize_advantages", "ppo.parallel.distributed"),
        "shuffled_minibatches": ("ppo.algorithm.update",),
        "reward_with_bootstrap": ("ppo.algorithm.advantages",),
    },
    "lecture_09": {
        "adapt_beta": ("ppo.trainers.variants",),
        "kl_penalty_loss": ("ppo.trainers.variants", "ppo.algorithm.losses.kl_estimate", "ppo.algorithm.losses.kl_per_sample"),
    },
    "lecture_10": {
        "gaussian_log_prob": ("torch.distributions", "ppo.models.networks"),
        "gaussian_entropy": ("torch.distributions", "ppo.models.networks"),
        "merge_moments": ("ppo.models.normalize",),
    },
    "lecture_11": {
        "same_step_autoreset": ("envs",),
        "cartpole_terminated": ("envs", "gymnasium"),
    },
    "lecture_12": {
        "completion_mask": ("ppo.lm",),
        "token_rewards": ("ppo.lm",),
        "kl_regularised_optimum": ("ppo.lm",),
    },
    "lecture_13": {
        "bradley_terry_loss": ("ppo.lm.algorithm.reward_model",),
        "group_normalised_advantages": ("ppo.lm",),
        "leave_one_out_advantages": ("ppo.lm",),
        "predict_best_of_n_kl": ("ppo.lm.exact.best_of_n",),
    },
    "lecture_15": {
        "masked_gru_step": ("ppo.models.recurrent_networks", "torch.nn.GRUCell", "torch.nn.GRU", "torch.gru_cell"),
        "linear_probe_r2": ("sklearn",),
    },
    "lecture_16": {
        "conv_output_side": ("torch.nn", "torch.conv2d", "torch.convolution", "ppo.models.encoders"),
        "masked_log_softmax": ("ppo.algorithm.distributions",),
        "best_guess_accuracy": ("lectures",),
    },
    "derivations": {
        "expected_gradient": ("torch.autograd", "torch.func", ".backward", "torch.distributions"),
        "score_function": ("torch.autograd", "torch.func", ".backward", "torch.distributions"),
        "gae_as_discounted_sum": ("ppo.algorithm.advantages",),
        "lambda_return_minus_value": ("ppo.algorithm.advantages",),
        "closed_form_optimum": ("ppo.lm",),
        "optimal_objective_value": ("ppo.lm",),
    },
    "ppo_from_scratch": {
        "collect_rollout": ("ppo.trainers.ppo", "ppo.algorithm.storage", "ppo.trainers.seed_batch", "ppo.trainers.base"),
        "advantages_and_returns": ("ppo.algorithm.advantages", "ppo.trainers.ppo"),
        "ppo_loss": ("ppo.algorithm.losses", "ppo.algorithm.update", "ppo.trainers.ppo", "ppo.trainers.variants"),
        "ppo_update": ("ppo.algorithm.update", "ppo.trainers.ppo", "ppo.algorithm.losses", "ppo.parallel.optim"),
    },
    "mystery_runs": {
        "diagnose": ("make_mystery_runs",),
    },
}


def forbidden_names(module_name: str) -> set[str]:
    """Every module or object name the exercise module `module_name` must not use, the
    solutions included. (Method names, beginning with ".", are checked per function.)"""
    names = {name for per_function in FORBIDDEN.get(module_name, {}).values() for name in per_function}
    return {name for name in names if not name.startswith(".")} | set(SOLUTIONS)


def forbidden_methods(module_name: str) -> dict[str, set[str]]:
    """exercise function → the methods it must not call (".backward" → "backward")."""
    return {function: {name[1:] for name in names if name.startswith(".")}
            for function, names in FORBIDDEN.get(module_name, {}).items()}


# Packages of this project: importing one of them (or a module in it) gives access to the
# forbidden names inside. `import torch` does not count: torch.distributions, say, is
# caught where it is used as a dotted name.
PROJECT_PACKAGES = ("ppo", "envs", "experiments", "lectures", "solutions", "make_mystery_runs")
DYNAMIC_IMPORTS = ("import_module", "__import__")


def _covers(imported: str, forbidden: str) -> bool:
    """True when importing `imported` gives access to `forbidden`: the same name, an object
    or module inside it, or (for this project's packages) a package that contains it."""
    if imported == forbidden or imported.startswith(forbidden + "."):
        return True
    return forbidden.startswith(imported + ".") and imported.split(".")[0] in PROJECT_PACKAGES


def _dotted(node: ast.AST) -> str | None:
    """`a.b.c` for an expression made of names and attributes only."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _uses(node: ast.AST, modules: set[str]) -> str | None:
    """What `node` does with a forbidden module or object, if anything."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            hits = sorted(name for name in modules if _covers(alias.name, name))
            if hits:
                return f"import {alias.name} (gives {', '.join(hits)})"
    elif isinstance(node, ast.ImportFrom) and node.level > 0:
        return f"a relative import (from {'.' * node.level}{node.module or ''} ...)"
    elif isinstance(node, ast.ImportFrom) and node.module:
        for alias in node.names:
            # `from ppo import networks` brings ppo.models.networks, not the rest of ppo
            hits = sorted(name for name in modules if _covers(f"{node.module}.{alias.name}", name)
                          or node.module == name or node.module.startswith(name + "."))
            if hits:
                return f"from {node.module} import {alias.name} (gives {', '.join(hits)})"
    elif isinstance(node, ast.Attribute):
        dotted = _dotted(node)
        if dotted and any(dotted == name or dotted.startswith(name + ".") for name in modules if "." in name):
            return dotted
    elif isinstance(node, ast.Call) and (_dotted(node.func) or "").split(".")[-1] in DYNAMIC_IMPORTS:
        for argument in node.args:
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                hits = sorted(name for name in modules if _covers(argument.value, name))
                if hits:
                    return f"imports {argument.value!r} (gives {', '.join(hits)})"
    return None


def shortcuts(source: str, modules: set[str], methods: dict[str, set[str]] | None = None) -> list[str]:
    """One line per use, in `source`, of a forbidden module or object (anywhere) or of a
    forbidden method (inside the function that must not call it): 'line N: what'."""
    tree = ast.parse(source)
    found = set()
    for node in ast.walk(tree):
        use = _uses(node, modules)
        if use:
            found.add((node.lineno, use))
    for function in (node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)):
        banned = (methods or {}).get(function.name, set())
        for node in ast.walk(function):
            if isinstance(node, ast.Attribute) and node.attr in banned:
                found.add((node.lineno, f".{node.attr} in {function.name}"))
    return [f"line {line}: {use}" for line, use in sorted(found)]


def module_shortcuts(path: Path, module_name: str) -> list[str]:
    """`shortcuts` of the exercise module at `path`, with its own table row."""
    return shortcuts(path.read_text(encoding="utf-8"), forbidden_names(module_name), forbidden_methods(module_name))
