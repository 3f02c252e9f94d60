"""Language-model geometry and embeddings: contextual curvature, ManifoldKV, SubspacePath pruning, InstEmb."""
