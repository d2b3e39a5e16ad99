"""The module tree: :class:`~brainx.nn.Module`, containers, and operations on a whole tree.

``Module`` finds its states and children by attribute; the collective
operations (``init_all_states``, ``reset_all_states`` and their ``vmap_``
versions) walk that tree; ``print(model)`` draws it. Everything here is
re-exported by :mod:`brainx.nn`.
"""
