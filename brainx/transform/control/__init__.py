"""Control flow over states: cond/switch, scan/for_loop/while loops, their caches and checks."""
