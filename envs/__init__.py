"""TierGym: memory placement on DRAM + CXL machines as a reinforcement-learning environment.

Public API (see ``docs/api.md``):

- :func:`load_scenario`, :func:`scenario_names`, :func:`hardware_presets`: scenarios and presets;
- :class:`Simulator`: a batch of machines to reset, step and read;
- :func:`compile_params`, :func:`init_state`, :func:`step`: the functional core;
- :class:`KernelConfig`: kernel mechanisms that are not actions;
- :func:`set_threads`: threads for the fixed point of a large batch (default 1).
"""

from envs.jit import set_threads
from envs.model import (
    Action,
    KernelConfig,
    Outputs,
    Params,
    State,
    compile_params,
    init_state,
    step,
)
from envs.scenario import (
    Scenario,
    ScenarioError,
    hardware_presets,
    load_hardware,
    load_scenario,
    scenario_names,
)
from envs.simulator import Simulator

__all__ = [
    "Action",
    "KernelConfig",
    "Outputs",
    "Params",
    "Scenario",
    "ScenarioError",
    "Simulator",
    "State",
    "compile_params",
    "hardware_presets",
    "init_state",
    "load_hardware",
    "load_scenario",
    "scenario_names",
    "set_threads",
    "step",
]

import gymnasium as _gym

from envs.gym_env import ENV_ID, TieredMemoryEnv, TieredMemoryVecEnv

if ENV_ID not in _gym.registry:
    _gym.register(
        id=ENV_ID,
        entry_point="envs.gym_env:TieredMemoryEnv",
        vector_entry_point="envs.gym_env:TieredMemoryVecEnv",
    )

__all__ += ["ENV_ID", "TieredMemoryEnv", "TieredMemoryVecEnv"]
