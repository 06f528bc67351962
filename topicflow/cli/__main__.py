"""``python -m topicflow.cli``: the command line."""
from topicflow.cli import main

main()
