"""The Datalog side: program representation, the template compiler and facts I/O."""
