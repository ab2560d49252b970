// MemoryScope playground: the view of the memory policy the server keeps, and the dashboard.
"use strict";
