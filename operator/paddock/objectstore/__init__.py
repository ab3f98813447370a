"""The object store (S3 and compatible servers): the only code that talks to one."""
