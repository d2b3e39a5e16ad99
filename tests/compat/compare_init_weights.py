"""Seeded brainstate and brainx programs build the same weights: initialisers, nn.Linear, nn.Conv*.

The same program (every ``nn.init`` initialiser on three shapes, seeded ones called twice,
a float16 and a unit draw, ``Linear`` and ``Conv1d``/``Conv2d``/``Conv3d`` with their default
initialisers, and the default generator's next draw) runs once on brainstate and once on
brainx, each in its own process; every array is compared bit for bit. brainstate is taken
from an unpacked wheel (``unzip brainstate-0.6.0-py3-none-any.whl -d DIR``) put first on
``PYTHONPATH``, with this environment's JAX and brainunit::

    python tests/compat/compare_init_weights.py /tmp/bsw/old /tmp/bsw/new

prints, per brainstate folder, how many arrays are bit-identical and each that is not.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np


def dump(which: str, out: str) -> None:
    """Run the program on ``brainstate`` or ``brainx`` and save every array to ``out``."""
    if which == "bs":
        import brainstate as B
    else:
        import brainx as B
    import brainunit as u
    import jax.numpy as jnp
    I = B.nn.init
    res = {}
    def put(name, x):
        x = x.value if hasattr(x, "value") and not hasattr(x, "shape") else x
        if isinstance(x, dict):
            for k, v in x.items():
                put(f"{name}.{k}", v)
            return
        res[name] = np.asarray(u.get_mantissa(x))

    B.random.seed(2024)
    inits = {
        "Normal": I.Normal(0.5, 2.0), "TruncatedNormal": I.TruncatedNormal(0.1, 0.5, lower=-0.5, upper=1.0),
        "Uniform": I.Uniform(-3.0, 2.0), "Gamma": I.Gamma(2.0, scale=1.5), "Exponential": I.Exponential(3.0),
        "VS_tn_avg": I.VarianceScaling(0.7, "fan_avg", "truncated_normal"),
        "VS_n_out": I.VarianceScaling(2.0, "fan_out", "normal", in_axis=0, out_axis=1),
        "VS_u_in": I.VarianceScaling(1.0, "fan_in", "uniform"),
        "KaimingNormal": I.KaimingNormal(), "KaimingUniform": I.KaimingUniform(),
        "XavierNormal": I.XavierNormal(), "XavierUniform": I.XavierUniform(),
        "LecunNormal": I.LecunNormal(), "LecunUniform": I.LecunUniform(),
        "KaimingNormal_normal": I.KaimingNormal(distribution="normal", mode="fan_out"),
        "Orthogonal": I.Orthogonal(), "Orthogonal_ax0": I.Orthogonal(2.0, axis=0),
        "Identity": I.Identity(3.0), "Constant": I.Constant(1.5), "ZeroInit": I.ZeroInit(),
    }
    shapes = [(7, 5), (3, 4, 6), (5, 9)]
    for name, init in inits.items():
        for shape in shapes:
            if name == "Identity" and len(shape) > 2:
                continue
            put(f"{name}{shape}", init(shape))
    put("DeltaOrthogonal", I.DeltaOrthogonal()((3, 3, 4, 6)))
    put("DeltaOrthogonal1", I.DeltaOrthogonal(1.5)((3, 4, 4)))
    # seeded initialisers: their own generator, advancing call after call
    for name, init in {"Normal_s": I.Normal(seed=3), "KN_s": I.KaimingNormal(seed=5),
                       "TN_s": I.TruncatedNormal(seed=7), "Orth_s": I.Orthogonal(seed=9),
                       "XU_s": I.XavierUniform(seed=11), "Gamma_s": I.Gamma(0.5, seed=13),
                       "Exp_s": I.Exponential(seed=15), "Uniform_s": I.Uniform(seed=17),
                       "DO_s": I.DeltaOrthogonal(seed=19)}.items():
        for i in range(2):
            put(f"{name}{i}", init((3, 4, 6) if name == "DO_s" else (6, 4)))
    put("float16", I.KaimingNormal()((6, 4), dtype=jnp.float16))
    put("unit", I.KaimingNormal(unit=u.mA)((6, 4)))
    # layers with their default initialisers
    B.random.seed(7)
    put("Linear", B.nn.Linear(20, 30).weight.value)
    put("Linear_b", B.nn.Linear((4, 20), (4, 12), b_init=I.Normal()).weight.value)
    put("Conv1d", B.nn.Conv1d((16, 3), 8, 3).weight.value)
    put("Conv2d", B.nn.Conv2d((8, 8, 3), 6, (3, 3), b_init=I.Uniform()).weight.value)
    put("Conv3d", B.nn.Conv3d((4, 4, 4, 2), 5, 3).weight.value)
    put("after", B.random.rand(4))
    np.savez(out, **res)


def compare(a_path: str, b_path: str) -> int:
    a, b = np.load(a_path), np.load(b_path)
    same = 0
    for k in a.files:
        x, y = a[k], b[k] if k in b.files else None
        if y is not None and x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y):
            same += 1
        else:
            print(f"  differs: {k}", None if y is None else (x.dtype, y.dtype, x.shape, y.shape))
    print(f"  {same} of {len(a.files)} arrays bit-identical")
    return len(a.files) - same


def main(argv) -> int:
    if len(argv) >= 2 and argv[0] == "--dump":
        dump(argv[1], argv[2])
        return 0
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        mine = os.path.join(tmp, "brainx.npz")
        subprocess.run([sys.executable, __file__, "--dump", "bx", mine], check=True)
        for folder in argv:
            theirs = os.path.join(tmp, "brainstate.npz")
            env = dict(os.environ, PYTHONPATH=os.path.abspath(folder))
            subprocess.run([sys.executable, __file__, "--dump", "bs", theirs], check=True, env=env,
                           cwd=tmp)
            version = subprocess.run([sys.executable, "-c", "import brainstate; print(brainstate.__version__)"],
                                     env=env, cwd=tmp, capture_output=True, text=True).stdout.strip()
            print(f"brainstate {version} ({folder}) against brainx:")
            bad += compare(theirs, mine)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
