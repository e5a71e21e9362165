package missingimport

import _ "example.com/nowhere"
