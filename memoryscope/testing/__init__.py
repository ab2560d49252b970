"""Test helpers shipped with MemoryScope: the store contract suite, fakes and builders."""
