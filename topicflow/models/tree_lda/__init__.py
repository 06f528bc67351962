"""Tree-prior LDA: tLDA (Boyd-Graber et al. 2007) and polylingual tree-based LDA, ptLDA (Zhai 2014, ch. 5).

Pure math, no Dask. A prior tree (:mod:`~topicflow.models.tree_lda.tree`) replaces each topic's
Dirichlet over words with Dirichlets over the children of every internal node; a token draws a topic
and then a root-to-leaf path that ends at its word. A flat tree is (polylingual) LDA.
"""
