"""Build the environments for an env id and a backend.

Every vector env made here speaks the core's `ppo.vec_env.VecEnv` interface, so the
trainer never asks which backend it has. Gymnasium environments that live in optional
extras (MuJoCo, Box2D) get a one-line message naming the extra to install.

    make_vec_env("CartPole-v1", 64, "auto")         # the batched torch CartPole: N copies, one call
    make_vec_env("MinAtar/Breakout-v1", 64)         # the batched torch Breakout (envs.minatar)
    make_vec_env("Hopper-v5", 1, "gymnasium")       # gymnasium's SyncVectorEnv behind the same interface
    gymnasium_env_factory("CartPole-v1")            # a function making one gymnasium env (evaluation);
                                                    # .make_vec(N): gymnasium's numpy-vectorised CartPole
    make_vec_env("CartPoleNoVel-v1", 64, "auto", frame_stack=4)  # each observation the last 4 (envs.frame_stack)

`frame_stack=K` (K > 1) stacks the last K observations in both: `FrameStackVecEnv` around
the training envs, gymnasium's `FrameStackObservation` + `FlattenObservation` around each
evaluation env, which give the same observations.

Every function here also takes gymnasium's `MODULE:ENV_ID` form, as `gymnasium.make` does:
`make_vec_env("walkmod:RandomWalk-v0", 8)` imports `walkmod`, whose import registers
RandomWalk-v0, then makes that id (`registered_env_id`). A module found nowhere on sys.path
is looked for in the current folder, as `python -m` would find it, so a console script run
next to the module finds it too. Such an id names the module's env, which only gymnasium
steps: backend 'auto' is gymnasium for it.
"""

from __future__ import annotations

import importlib
import os
import sys

import gymnasium as gym

from envs.classic import BATCHED_ENV_IDS as CLASSIC_BATCHED_ENV_IDS
from envs.classic import TORCH_ENV_IDS, make_torch_vec_env  # noqa: F401 (TORCH_ENV_IDS: for importers)
from envs.frame_stack import FrameStackVecEnv, stacked_space
from envs.gymnasium_vec_env import GymnasiumVecEnv
from envs.minatar import MINATAR_ENV_IDS, make_minatar_vec_env
from envs.minatar.gymnasium_env import SPECS as OWN_SPECS

BATCHED_ENV_IDS = CLASSIC_BATCHED_ENV_IDS + MINATAR_ENV_IDS  # every id with a batched torch version

BACKENDS = ("auto", "gymnasium", "torch")

# The optional dependency group of this project that provides each gymnasium family.
EXTRA_FOR_ENTRY_POINT = {
    "gymnasium.envs.mujoco": "mujoco",
    "gymnasium.envs.box2d": "box2d",
}


class EnvError(ValueError):
    """An env id, backend or missing package the user can fix; the message is one line."""


SHOWN_IDS = 5  # at most this many of the ids a module registered are named in an error


def split_env_id(env_id: str) -> tuple[str | None, str]:
    """('walkmod', 'RandomWalk-v0') for 'walkmod:RandomWalk-v0'; (None, env_id) for a plain id."""
    module, colon, name = env_id.partition(":")
    return (module, name) if colon else (None, env_id)


def registered_env_id(env_id: str) -> str:
    """The id of gymnasium's registry that `env_id` names: a plain id itself, once registered;
    for 'MODULE:ENV_ID', ENV_ID, after importing MODULE (whose import registers it).
    EnvError (one line) if the id is not registered or the module cannot be imported."""
    module, name = split_env_id(env_id)
    if module is None:
        if name not in gym.registry:
            raise EnvError(
                f"env_id = {env_id!r} is not a registered gymnasium environment "
                f"(for example CartPole-v1, Acrobot-v1, Pendulum-v1, LunarLander-v3, HalfCheetah-v5); "
                f"to train an environment of your own, register it in a module and pass MODULE:ENV_ID"
            )
        return name
    if not all(part.isidentifier() for part in module.split(".")):
        raise EnvError(f"env_id = {env_id!r}: {module!r} before ':' is not a module name "
                       f"(MODULE:ENV_ID, for example walkmod:RandomWalk-v0)")
    before = set(gym.registry)
    import_env_module(env_id, module)
    if name not in gym.registry:
        found = sorted((set(gym.registry) - before) | set(ids_registered_from(module)))
        shown = ", ".join(found[:SHOWN_IDS]) + (", ..." if len(found) > SHOWN_IDS else "")
        raise EnvError(f"env_id = {env_id!r}: module {module!r} imported but did not register {name!r} "
                       f"({f'it registers {shown}' if found else 'it registers no env id'})")
    return name


def import_env_module(env_id: str, module: str) -> None:
    """Import `module`, the MODULE of env_id 'MODULE:ENV_ID' (`import_here_too`); EnvError (one line) if it fails."""
    try:
        import_here_too(module)
    except (ImportError, SyntaxError, gym.error.Error) as error:
        first_line = (str(error).splitlines() or [type(error).__name__])[0]
        hint = ""
        if isinstance(error, ModuleNotFoundError) and is_missing(error, module):
            hint = "; run the command in the folder that holds it, or put that folder on PYTHONPATH"
        raise EnvError(f"env_id = {env_id!r}: module {module!r} cannot be imported ({first_line}){hint}") from None


def import_here_too(module: str):
    """importlib.import_module(module), looking in the current folder too when no folder of sys.path
    has the module (a console script's sys.path lacks the current folder, `python -m`'s has it);
    the current folder then stays on sys.path, last, so that the module's imports of its neighbours work."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        here = os.getcwd()
        if not is_missing(error, module) or here in sys.path or "" in sys.path:
            raise
    sys.path.append(here)
    importlib.invalidate_caches()
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if is_missing(error, module):
            sys.path.remove(here)
        raise


def is_missing(error: ModuleNotFoundError, module: str) -> bool:
    """Whether `error` says `module` itself (or a package above it) is not found, rather than one it imports."""
    return error.name is not None and (module == error.name or module.startswith(error.name + "."))


def ids_registered_from(module: str) -> list[str]:
    """The registered ids whose entry point is in `module` or a module inside it."""
    def home(entry_point) -> str:
        return entry_point.partition(":")[0] if isinstance(entry_point, str) else getattr(entry_point, "__module__", "")

    return [env_id for env_id, spec in gym.registry.items()
            if home(spec.entry_point) == module or home(spec.entry_point).startswith(module + ".")]


def require_count(name: str, value) -> None:
    """EnvError (one line, the words of the configs' check) unless value is an integer ≥ 1."""
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        raise EnvError(f"{name} = {value!r} must be a positive integer")


def check_env_id(env_id: str) -> str:
    """The registered id `env_id` names (`registered_env_id`: a `MODULE:` prefix imports MODULE);
    EnvError if gymnasium does not know it."""
    return registered_env_id(env_id)


def env_spec(env_id: str) -> gym.envs.registration.EnvSpec:
    """gymnasium's spec of `env_id` (plain or 'MODULE:ENV_ID'); for the project's MinAtar ids, the
    project's own spec, whatever another package registered (EnvError if unknown)."""
    name = registered_env_id(env_id)
    return OWN_SPECS.get(name) or gym.spec(name)


def resolve_backend(env_id: str, backend: str) -> str:
    """'auto' → 'torch' when a batched version of env_id exists, else 'gymnasium' (always for
    a 'MODULE:ENV_ID' id: it names the module's env, which has no batched version)."""
    if backend not in BACKENDS:
        raise EnvError(f"env_backend = {backend!r} is not one of {', '.join(BACKENDS)}")
    if backend == "auto":
        return "torch" if env_id in BATCHED_ENV_IDS else "gymnasium"
    if backend == "torch" and env_id not in BATCHED_ENV_IDS:
        raise EnvError(
            f"env_id = {env_id!r} has no batched torch version; env_backend 'torch' supports "
            f"{', '.join(BATCHED_ENV_IDS)}"
        )
    return backend


def missing_extra_message(env_id: str, error: Exception) -> str:
    """One line saying which package (or optional extra of this project) making env_id needs."""
    entry_point = str(gym.spec(split_env_id(env_id)[1]).entry_point)
    extra = next((name for prefix, name in EXTRA_FOR_ENTRY_POINT.items() if entry_point.startswith(prefix)), None)
    if extra is None:
        return f"{env_id} needs a package that is not installed ({str(error).splitlines()[0]})"
    return f"{env_id} needs the optional extra '{extra}': pip install -c constraints.txt -e '.[{extra}]'"


def make_gymnasium_env(env_id: str, **kwargs) -> gym.Env:
    """gym.make (of a plain or 'MODULE:ENV_ID' id) with the missing-extra error turned into an EnvError."""
    name = check_env_id(env_id)
    try:
        return gym.make(OWN_SPECS.get(name, name), **kwargs)
    except (gym.error.DependencyNotInstalled, ImportError) as error:
        raise EnvError(missing_extra_message(env_id, error)) from None


class GymnasiumEnvFactory:
    """Makes gymnasium's env `env_id`: one copy when called, as evaluation and recording
    take it, and N copies in one vector env with `make_vec(N)`.

    `make_vec` gives gymnasium's own numpy-vectorised version where the env has one
    (CartPole-v1: the same physics in gymnasium's code, N copies per numpy operation, no
    Python loop over them), and None otherwise; the caller then steps N single copies.
    With `frame_stack` K > 1 each copy's observation is its last K, flattened oldest first.
    A 'MODULE:ENV_ID' id imports MODULE (`registered_env_id`) wherever a copy is made.
    """

    def __init__(self, env_id: str, frame_stack: int = 1, **kwargs):
        self.env_id, self.frame_stack, self.kwargs = env_id, frame_stack, kwargs

    def __call__(self) -> gym.Env:
        name = registered_env_id(self.env_id)
        env = gym.make(OWN_SPECS.get(name, name), **self.kwargs)  # ids another package may re-register
        if self.frame_stack == 1:
            return env
        stacked_space(env.observation_space, self.frame_stack)  # a clear error for a space that cannot stack
        stacked = gym.wrappers.FrameStackObservation(env, self.frame_stack, padding_type="reset")
        return gym.wrappers.FlattenObservation(stacked)

    def make_vec(self, num_envs: int) -> gym.vector.VectorEnv | None:
        name = registered_env_id(self.env_id)
        if self.kwargs or self.frame_stack > 1 or name in OWN_SPECS or gym.spec(name).vector_entry_point is None:
            return None
        return gym.make_vec(name, num_envs, vectorization_mode="vector_entry_point")

    def __repr__(self) -> str:
        stacked = f", frame_stack={self.frame_stack}" if self.frame_stack > 1 else ""
        return f"GymnasiumEnvFactory({self.env_id!r}{stacked})"


def gymnasium_env_factory(env_id: str, frame_stack: int = 1, **kwargs) -> GymnasiumEnvFactory:
    """A function that makes one gymnasium env (what evaluation and recording take), with
    `make_vec(N)` for gymnasium's numpy-vectorised version where there is one; with
    `frame_stack` K > 1, each observation is the last K (as the training envs give them).

    It makes one env right away, so a missing extra (or a space that cannot stack) is
    reported here and not later.
    """
    require_count("frame_stack", frame_stack)
    make_gymnasium_env(env_id, **kwargs).close()
    factory = GymnasiumEnvFactory(env_id, frame_stack, **kwargs)
    if frame_stack > 1:
        try:
            factory().close()
        except ValueError as error:
            raise EnvError(f"{env_id}: {error}") from None
    return factory


def make_batched_vec_env(env_id: str, num_envs: int, device: str = "cpu", groups: int = 1):
    """The batched torch version of env_id: `envs.minatar`'s games or `envs.classic`'s envs."""
    make = make_minatar_vec_env if env_id in MINATAR_ENV_IDS else make_torch_vec_env
    return make(env_id, num_envs, device=device, groups=groups)


def make_vec_env(env_id: str, num_envs: int, backend: str = "auto", device: str = "cpu", frame_stack: int = 1):
    """N copies of env_id behind the VecEnv interface, stepped by the chosen backend;
    with `frame_stack` K > 1, each observation is the copy's last K (envs.frame_stack)."""
    require_count("num_envs", num_envs)
    require_count("frame_stack", frame_stack)
    name = check_env_id(env_id)
    backend = resolve_backend(env_id, backend)
    if backend == "torch":
        envs = make_batched_vec_env(env_id, num_envs, device=device)
    else:
        try:
            envs = GymnasiumVecEnv(name, num_envs, device=device)
        except (gym.error.DependencyNotInstalled, ImportError) as error:
            raise EnvError(missing_extra_message(env_id, error)) from None
    return stack_frames(envs, env_id, frame_stack, num_envs)


def make_seed_batch_env(env_id: str, num_seeds: int, num_envs: int, backend: str = "auto", device: str = "cpu",
                        frame_stack: int = 1):
    """The envs of a batch of `num_seeds` runs with `num_envs` copies each (ppo.trainers.seed_batch).

    Torch backend: one env of num_seeds · num_envs copies in seed groups (one physics call,
    one random stream per run). Gymnasium: a StackedVecEnv of each run's own envs. With
    `frame_stack` K > 1, one FrameStackVecEnv around them all (stacks are per copy).
    """
    for name, value in (("num_seeds", num_seeds), ("num_envs", num_envs), ("frame_stack", frame_stack)):
        require_count(name, value)
    check_env_id(env_id)
    backend = resolve_backend(env_id, backend)
    if backend == "torch":
        envs = make_batched_vec_env(env_id, num_seeds * num_envs, device=device, groups=num_seeds)
    else:
        from envs.stacked_vec_env import StackedVecEnv

        envs = StackedVecEnv([make_vec_env(env_id, num_envs, backend, device) for _ in range(num_seeds)])
    return stack_frames(envs, env_id, frame_stack, num_envs)


def stack_frames(envs, env_id: str, frame_stack: int, member_num_envs: int):
    """`envs` itself for frame_stack 1, else a FrameStackVecEnv of them (EnvError if they cannot stack)."""
    if frame_stack == 1:
        return envs
    try:
        return FrameStackVecEnv(envs, frame_stack, member_num_envs)
    except ValueError as error:
        envs.close()
        raise EnvError(f"{env_id}: {error}") from None
