"""Stacks: each composes constructs from triton_cdk for one stage's configuration."""
