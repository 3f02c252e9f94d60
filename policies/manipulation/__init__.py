"""The manipulation policies that are not VLAs: the privileged scripted experts (SIMPLER, VLABench, ManiSkill3),
the modular bases that perceive their target instead, the grasp-retry wrapper and the VLABench delta adapter.
"""
