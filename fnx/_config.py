"""``fnx.config``: accepts the JAX flags that ported code sets.

fnx has no global precision switch: 64-bit arrays stay 64-bit and defaults
are 32-bit, whatever ``jax_enable_x64`` says. The flag is accepted (and
readable) so code written for JAX runs unchanged.
"""


class Config:
    _KNOWN = {"jax_enable_x64": False, "jax_platform_name": "cpu", "jax_debug_nans": False,
              "jax_disable_jit": False, "jax_default_matmul_precision": None}

    def __init__(self):
        self._values = dict(self._KNOWN)

    def update(self, name, value):
        if name not in self._KNOWN:
            raise AttributeError(f"fnx.config: unknown option {name!r}; known options are "
                                 f"{sorted(self._KNOWN)}")
        self._values[name] = value

    def read(self, name):
        return self._values[name]

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None


config = Config()
