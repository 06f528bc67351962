"""``python -m topicflow``: the command line."""
from topicflow.cli import main

main()
