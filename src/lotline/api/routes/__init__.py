"""One router per Marquez resource; each route parses, calls one service use case, and presents."""
