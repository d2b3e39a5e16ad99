"""The core every transform is built on: the stateful function, its one trace, and the replay."""
