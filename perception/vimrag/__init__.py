"""VimRAG's perception: visual tokens of document pages and the external vision-language reader."""
