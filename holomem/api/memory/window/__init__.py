"""An agent's context window: the prompt block, budgets, token counts, working contexts."""
