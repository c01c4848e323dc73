"""Running the programs offline: the mock runtime, AWS's stand-in answers, stack files, and `make plan`."""
