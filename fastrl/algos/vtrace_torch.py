"""V-trace (Espeholt et al. 2018, eq. 1) in torch, for the learner's device.

Same math and signature as ``csrc_free_kernels.vtrace.vtrace``: inputs [N, T] (values
[N, T+1], values[:, T] bootstraps), ``dones`` the codes of ``csrc_free_kernels.step_end`` (a
truncated step bootstraps from ``final_values``, V of the episode's final observation; any end
stops the trace), rho = min(rho_bar, ratio), c = lam * min(c_bar, ratio). Float32 on any
device; targets carry no gradient.
"""

import torch

from csrc_free_kernels.step_end import CONTINUES, TRUNCATED


@torch.no_grad()
def vtrace_torch(
    behaviour_logp, target_logp, rewards, dones, values, gamma, rho_bar, c_bar, lam=1.0, final_values=None
):
    """Returns (vs, pg_advantages), float32 [N, T], on the inputs' device."""
    f32 = torch.float32
    horizon = rewards.shape[1]
    if values.shape != (rewards.shape[0], horizon + 1):
        raise ValueError(f"values must be [N, T+1], got {tuple(values.shape)} for rewards {tuple(rewards.shape)}")
    truncated = dones == TRUNCATED
    if final_values is None:
        if bool(truncated.any()):
            raise ValueError("dones mark truncated steps (code 2) but no final_values were given to bootstrap them")
        final_values = torch.zeros(truncated.shape, dtype=f32, device=truncated.device)
    ratio = torch.exp(target_logp.to(f32) - behaviour_logp.to(f32))
    rho = ratio.clamp(max=float(rho_bar))
    c = lam * ratio.clamp(max=float(c_bar))
    rewards = rewards.to(f32)
    goes_on = (dones == CONTINUES).to(f32)
    # what a truncated step bootstraps from; 0 at a termination (final_values elsewhere are never read)
    end_value = torch.where(truncated, final_values.to(f32), 0.0)
    values = values.to(f32)
    v_t, v_next = values[:, :-1], values[:, 1:]
    delta = rho * (rewards + gamma * (goes_on * v_next + end_value) - v_t)
    trace = gamma * goes_on * c
    # acc_t = v_t - V_t = delta_t + gamma k_t c_t acc_{t+1}, acc_T = 0
    acc = torch.zeros_like(values[:, 0])
    vs_minus_v = torch.empty_like(delta)
    for t in range(horizon - 1, -1, -1):
        acc = delta[:, t] + trace[:, t] * acc
        vs_minus_v[:, t] = acc
    vs = v_t + vs_minus_v
    vs_next = torch.cat([vs[:, 1:], values[:, -1:]], dim=1)
    pg_advantages = rho * (rewards + gamma * (goes_on * vs_next + end_value) - v_t)
    return vs, pg_advantages
