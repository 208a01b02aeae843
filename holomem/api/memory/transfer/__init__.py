"""Export and import: facts and their typed relations moved between stores."""
