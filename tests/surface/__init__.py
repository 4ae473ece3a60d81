"""What a user meets outside the package's folders: the command, the docs and their recipes, plug-ins installed with
pip, the Pythons supported."""
