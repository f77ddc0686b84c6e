"""``vk sync``: keep a knowledge base equal to a folder through the bulk document API."""
