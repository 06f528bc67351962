"""Math shared by every model family: special functions, Dirichlet expectations, blocks, random numbers."""
