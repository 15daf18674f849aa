"""``fnx.numpy.fft``: the Array API fft extension (being written)."""
