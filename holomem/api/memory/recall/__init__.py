"""Recall and explain: the calls, the ranking, explanations, the neighbour policy and rerankers."""
