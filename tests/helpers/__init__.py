"""The tests' helpers, in one package: envs and models that misbehave on purpose (``faulty_envs``,
``faulty_models``, ``masked_env``), small envs with a known answer (``target_env``, ``memory_env``,
``time_limit_env``, ``time_limited_bandit``, ``dict_envs``), the settings and checks engine tests share (``runs``),
and what several test modules build on (``batch_invariance``, ``recording``, ``torchrun``, ``multiagent_runs``).
Configs name the envs and models as ``tests.helpers.<module>:<factory>``."""
