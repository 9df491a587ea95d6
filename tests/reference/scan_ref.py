"""Plain float64 numpy oracles for the Mamba-1 kernels: the selective scan (S6)
and the causal depthwise conv1d (DESIGN.md, "Selective scan (S6)", "Causal
depthwise conv1d").

Design: written from the numeric contract only, never calling lutcore.  Every
input is cast to float64; the scan is the plain sequential recurrence over t,
vectorised over (batch, D, N); the backward is derived by hand (reverse-time
recurrence for dh) and is self-checked against central differences in
tests/ops/test_reference_selfcheck_scan.py.

selective_scan_ref(u, delta, A, B, C, D=None, z=None, delta_bias=None,
                   delta_softplus=True, discretization="zoh",
                   initial_state=None, return_last_state=False)
    name           shape           IN/OUT
    u              (batch, L, D)   IN
    delta          (batch, L, D)   IN   dt = softplus(delta + delta_bias) or delta + delta_bias
    A              (D, N)          IN   Abar = exp(dt*A)
    B              (batch, L, N)   IN   Bbar = dt*B (simplified) or dt*expm1(dt*A)/(dt*A)*B (zoh)
    C              (batch, L, N)   IN   y_t = C_t . h_t + D*u_t
    D              (D,)            IN   optional skip
    z              (batch, L, D)   IN   optional gate, y *= silu(z)
    delta_bias     (D,)            IN   optional
    initial_state  (batch, D, N)   IN   optional h_{-1} (else 0)
    y              (batch, L, D)   OUT
    last_state     (batch, D, N)   OUT  h_{L-1}, when return_last_state

selective_scan_backward_ref(dy, <same inputs>) -> dict of gradients of sum(dy*y):
    "u", "delta", "A", "B", "C" always; "D", "z", "delta_bias", "initial_state"
    only when that input was given.  Same shapes as the inputs.

causal_conv1d_ref(x, weight, bias=None)
    x       (batch, L, D)  IN
    weight  (D, K)         IN   weight[:, K-1] multiplies the current step
    bias    (D,)           IN   optional
    y       (batch, L, D)  OUT  y[b,t,d] = bias[d] + sum_k weight[d,k]*x[b,t-(K-1)+k,d], zero before 0
causal_conv1d_backward_ref(dy, x, weight, bias=None) -> (dx, dweight, dbias)

Backward derivation (per batch b, channel d, state n; a = dt*A):
    ZOH factor   g(a)  = expm1(a)/a  (g(0) = 1),  Bbar = dt*g(a)*B
    d(dt*g(a))/d dt = g(a) + a*g'(a) = d expm1(a)/da = exp(a)
    d(dt*g(a))/d A  = dt^2 * g'(a),   g'(a) = (a*exp(a) - expm1(a))/a^2
                                            = sum_{k>=1} k a^(k-1)/(k+1)!   (series, small |a|)
    gh_t = dyc_t*C_t + Abar_{t+1}*gh_{t+1}  (total gradient reaching h_t; gh_L = 0)
    dAbar_t = gh_t*h_{t-1},  dBbar_t = gh_t*u_t,  du_t += sum_n gh_t*Bbar_t,  dh_{-1} = Abar_0*gh_0
"""
import math

import numpy as np

SOFTPLUS_THRESHOLD = 20.0   # torch.nn.functional.softplus: x > 20 -> x
_SERIES_BELOW = 0.5         # |a| below this: g and g' from their Taylor series
_SERIES_TERMS = 24          # 0.5**23 / 25! ~ 1e-32: far below float64 eps


def _f64(x):
    return None if x is None else np.asarray(x, dtype=np.float64)


def softplus_ref(x):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore"):
        below = np.log1p(np.exp(np.minimum(x, SOFTPLUS_THRESHOLD)))
        return np.where(x > SOFTPLUS_THRESHOLD, x, below)


def softplus_grad_ref(x):
    """d softplus / dx with torch's threshold: sigmoid(x), or 1 above it."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > SOFTPLUS_THRESHOLD, 1.0, sigmoid_ref(x))


def sigmoid_ref(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(-np.abs(x))                                  # never overflows
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def silu_ref(x):
    x = np.asarray(x, dtype=np.float64)
    return x * sigmoid_ref(x)


def silu_grad_ref(x):
    s = sigmoid_ref(x)
    return s * (1.0 + x * (1.0 - s))


def zoh_factor_ref(a):
    """g(a) = expm1(a)/a with g(0) = 1 (no division by zero)."""
    a = np.asarray(a, dtype=np.float64)
    safe = np.where(a == 0.0, 1.0, a)
    return np.where(a == 0.0, 1.0, np.expm1(a) / safe)


def zoh_factor_grad_ref(a):
    """g'(a) = (a*exp(a) - expm1(a)) / a^2; the closed form cancels for small |a|,
    so there the series sum_{k>=1} k a^(k-1)/(k+1)! is used."""
    a = np.asarray(a, dtype=np.float64)
    small = np.abs(a) < _SERIES_BELOW
    s = np.zeros_like(a)
    a_s = np.where(small, a, 0.0)
    for k in range(_SERIES_TERMS, 0, -1):                   # Horner, highest term first
        s = s * a_s + k / math.factorial(k + 1)
    safe = np.where(small, 1.0, a)
    with np.errstate(over="ignore", invalid="ignore"):
        closed = (safe * np.exp(safe) - np.expm1(safe)) / (safe * safe)
    return np.where(small, s, closed)


def _check(name, x, shape):
    if x is not None and x.shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {x.shape}")


def _scan_forward(u, delta, A, B, C, D, z, delta_bias, delta_softplus, discretization,
                  initial_state):
    """All intermediates of the forward pass (float64)."""
    if discretization not in ("zoh", "simplified"):
        raise ValueError(f"discretization: unknown {discretization!r}")
    u, delta, A, B, C = (_f64(v) for v in (u, delta, A, B, C))
    D, z, delta_bias, initial_state = (_f64(v) for v in (D, z, delta_bias, initial_state))
    batch, L, Dm = u.shape
    N = A.shape[1]
    for name, x, shape in (("delta", delta, u.shape), ("A", A, (Dm, N)), ("B", B, (batch, L, N)),
                           ("C", C, (batch, L, N)), ("D", D, (Dm,)), ("z", z, u.shape),
                           ("delta_bias", delta_bias, (Dm,)),
                           ("initial_state", initial_state, (batch, Dm, N))):
        _check(name, x, shape)

    s = delta + (delta_bias if delta_bias is not None else 0.0)       # (batch, L, D) pre-activation
    dt = softplus_ref(s) if delta_softplus else s                     # (batch, L, D)
    a = dt[..., None] * A                                             # (batch, L, D, N) dt*A
    Abar = np.exp(a)                                                  # (batch, L, D, N)
    if discretization == "zoh":
        fac = dt[..., None] * zoh_factor_ref(a)                       # (batch, L, D, N) expm1(a)/A
    else:
        fac = np.broadcast_to(dt[..., None], a.shape)                 # (batch, L, D, N) dt
    Bbar = fac * B[:, :, None, :]                                     # (batch, L, D, N)

    h = np.empty((batch, L + 1, Dm, N))                               # h[:, t+1] = h_t; h[:, 0] = h_{-1}
    h[:, 0] = 0.0 if initial_state is None else initial_state         # (batch, D, N)
    for t in range(L):                                                # the recurrence, in time order
        h[:, t + 1] = Abar[:, t] * h[:, t] + Bbar[:, t] * u[:, t, :, None]  # (batch, D, N)
    yc = np.einsum("btdn,btn->btd", h[:, 1:], C)                      # (batch, L, D) C_t . h_t
    if D is not None:
        yc = yc + D * u                                               # (batch, L, D)
    y = yc * silu_ref(z) if z is not None else yc                     # (batch, L, D)
    return dict(u=u, delta=delta, A=A, B=B, C=C, D=D, z=z, s=s, dt=dt, a=a, Abar=Abar,
                fac=fac, Bbar=Bbar, h=h, yc=yc, y=y)


def selective_scan_ref(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=True,
                       discretization="zoh", initial_state=None, return_last_state=False):
    f = _scan_forward(u, delta, A, B, C, D, z, delta_bias, delta_softplus, discretization,
                      initial_state)
    if return_last_state:
        return f["y"], f["h"][:, -1].copy()                           # (batch, L, D), (batch, D, N)
    return f["y"]


def selective_scan_backward_ref(dy, u, delta, A, B, C, D=None, z=None, delta_bias=None,
                                delta_softplus=True, discretization="zoh", initial_state=None):
    f = _scan_forward(u, delta, A, B, C, D, z, delta_bias, delta_softplus, discretization,
                      initial_state)
    dy = _f64(dy)                                                     # (batch, L, D)
    _check("dy", dy, f["u"].shape)
    u, A, B, C, dt, a, Abar, Bbar, h = (f[k] for k in ("u", "A", "B", "C", "dt", "a",
                                                       "Abar", "Bbar", "h"))
    batch, L, Dm = u.shape
    N = A.shape[1]
    grads = {}

    if z is not None:
        zz = f["z"]
        dyc = dy * silu_ref(zz)                                       # (batch, L, D)
        grads["z"] = dy * f["yc"] * silu_grad_ref(zz)                 # (batch, L, D)
    else:
        dyc = dy                                                      # (batch, L, D)
    du = np.zeros_like(u)                                             # (batch, L, D)
    if D is not None:
        grads["D"] = np.sum(dyc * u, axis=(0, 1))                     # (D,)
        du += dyc * f["D"]                                            # (batch, L, D)
    grads["C"] = np.einsum("btd,btdn->btn", dyc, h[:, 1:])            # (batch, L, N)

    # reverse-time recurrence: gh[:, t] = total gradient reaching h_t
    gh = np.empty((batch, L, Dm, N))                                  # (batch, L, D, N)
    carry = np.zeros((batch, Dm, N))                                  # Abar_{t+1} * gh_{t+1}
    for t in range(L - 1, -1, -1):
        gh[:, t] = dyc[:, t, :, None] * C[:, t, None, :] + carry      # (batch, D, N)
        carry = Abar[:, t] * gh[:, t]                                 # (batch, D, N)
    if initial_state is not None:
        grads["initial_state"] = carry                                # (batch, D, N) Abar_0 * gh_0

    dAbar = gh * h[:, :-1]                                            # (batch, L, D, N)
    dBbar = gh * u[..., None]                                         # (batch, L, D, N)
    du += np.sum(gh * Bbar, axis=3)                                   # (batch, L, D)
    grads["u"] = du

    # Abar = exp(a), a = dt*A
    ddt_n = dAbar * Abar * A                                          # (batch, L, D, N)
    dA = np.sum(dAbar * Abar * dt[..., None], axis=(0, 1))            # (D, N)
    dfac = dBbar * B[:, :, None, :]                                   # (batch, L, D, N) d/d fac
    grads["B"] = np.einsum("btdn,btdn->btn", dBbar, f["fac"])         # (batch, L, N)
    if discretization == "zoh":
        ddt_n = ddt_n + dfac * Abar                                   # d(dt g(a))/d dt = exp(a)
        dA = dA + np.sum(dfac * dt[..., None] ** 2 * zoh_factor_grad_ref(a),
                         axis=(0, 1))                                 # (D, N)
    else:
        ddt_n = ddt_n + dfac                                          # d dt / d dt = 1
    grads["A"] = dA
    ddt = np.sum(ddt_n, axis=3)                                       # (batch, L, D)
    ds = ddt * softplus_grad_ref(f["s"]) if delta_softplus else ddt   # (batch, L, D)
    grads["delta"] = ds
    if delta_bias is not None:
        grads["delta_bias"] = np.sum(ds, axis=(0, 1))                 # (D,)
    return grads


# ---------------------------------------------------------------- conv1d
def causal_conv1d_ref(x, weight, bias=None):
    x, weight, bias = _f64(x), _f64(weight), _f64(bias)
    batch, L, Dm = x.shape
    if weight.ndim != 2 or weight.shape[0] != Dm:
        raise ValueError(f"weight: expected shape ({Dm}, K), got {weight.shape}")
    _check("bias", bias, (Dm,))
    K = weight.shape[1]
    xp = np.concatenate([np.zeros((batch, K - 1, Dm)), x], axis=1)   # (batch, L+K-1, D) zero history
    y = np.zeros((batch, L, Dm))                                      # (batch, L, D)
    for k in range(K):
        y += weight[:, k] * xp[:, k:k + L]                            # tap k sees x[t-(K-1)+k]
    if bias is not None:
        y += bias
    return y


def causal_conv1d_backward_ref(dy, x, weight, bias=None):
    dy, x, weight = _f64(dy), _f64(x), _f64(weight)
    batch, L, Dm = x.shape
    _check("dy", dy, x.shape)
    K = weight.shape[1]
    xp = np.concatenate([np.zeros((batch, K - 1, Dm)), x], axis=1)   # (batch, L+K-1, D)
    dxp = np.zeros_like(xp)                                           # (batch, L+K-1, D)
    dw = np.zeros((Dm, K))                                            # (D, K)
    for k in range(K):
        dxp[:, k:k + L] += weight[:, k] * dy                          # (batch, L, D)
        dw[:, k] = np.sum(dy * xp[:, k:k + L], axis=(0, 1))           # (D,)
    db = np.sum(dy, axis=(0, 1))                                      # (D,)
    return dxp[:, K - 1:], dw, db
