"""ManiSkill3 backend studies."""
