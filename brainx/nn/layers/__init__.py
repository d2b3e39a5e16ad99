"""Deep-learning layers: linear, convolution, pooling, normalisation, dropout, embedding,
recurrent cells, activations and shape operations (all re-exported by :mod:`brainx.nn`)."""
