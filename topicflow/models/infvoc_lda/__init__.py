"""Online LDA with an infinite vocabulary, infvoc (Zhai 2014, ch. 7). Pure math, no Dask.

(Placeholder from branch infvoc-g0 so that ``g0`` imports; infvoc-core owns this file: on merge, keep theirs.)
"""
