"""Memory chats: a chatbot front end that brings the user's memories into every reply."""
