"""Training families behind ``launch.train``: each module runs one kind of training and writes the train contract."""
