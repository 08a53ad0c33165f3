"""Write-side operations of turns: runs, permissions, their execution, recovery and retention."""
