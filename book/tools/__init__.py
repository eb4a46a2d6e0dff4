"""Hand-written authoring tools for the book: export, pair check, student edition, notebooks."""
