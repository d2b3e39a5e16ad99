"""The pretty-repr engine, below :mod:`brainx.state` and :mod:`brainx.util` so that both use it.

* :mod:`brainx.pretty_repr.options`: the options of a repr (:class:`ReprOptions` and the
  ``repr_options`` block), a model's size summary (:class:`ReprSummary`) and array
  summaries (``f32[3,4]``);
* :mod:`brainx.pretty_repr.layout`: the items an object yields (:class:`PrettyType`,
  :class:`PrettyAttr`) and the engine that lays them out to a width, marking shared and
  cyclic references.

Users import these names from :mod:`brainx.util`, where the protocol
(:class:`~brainx.util.PrettyRepr`, :func:`~brainx.util.pretty_format`) lives too. A
state's ``repr`` is made here, so :mod:`brainx.state` (which :mod:`brainx.util` imports)
must not need :mod:`brainx.util` for it.
"""

from brainx import _import_check  # noqa: F401  (an ImportError that names a folder shadowing brainx)
